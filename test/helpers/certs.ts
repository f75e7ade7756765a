import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface TestCerts {
  dir: string;
  /** PEM of the CA that signed the broker's and the client's certificates. */
  caPem: string;
  /** PKCS12 keystore of the broker (certificate for IP 127.0.0.1 and localhost). */
  brokerKeystore: string;
  keystorePassword: string;
  /** PEM certificate and key of a client, signed by the CA (for mutual TLS). */
  clientCert: string;
  clientKey: string;
  /** PEM of a CA that signed nothing here: a client trusting only it must fail the handshake. */
  otherCaPem: string;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/**
 * A throw-away PKI made with openssl (EC P-256 keys: quick to make on a small machine): a CA, a
 * broker certificate in a PKCS12 keystore that Java reads, a client certificate and a second CA.
 */
export function makeTestCerts(dir: string, keystorePassword = 'changeit-123'): TestCerts {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  for (const ca of ['ca', 'other-ca']) {
    openssl(dir, [
      'req',
      '-x509',
      ...ec,
      '-keyout',
      `${ca}.key`,
      '-out',
      `${ca}.pem`,
      '-days',
      '2',
      '-subj',
      `/CN=sluice-test-${ca}`,
    ]);
  }
  writeFileSync(join(dir, 'broker.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  writeFileSync(join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const [name, subj] of [
    ['broker', '/CN=127.0.0.1'],
    ['client', '/CN=sluice-test-client'],
  ] as const) {
    openssl(dir, ['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj]);
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-out',
      `${name}.pem`,
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
    ]);
  }
  openssl(dir, [
    'pkcs12',
    '-export',
    '-in',
    'broker.pem',
    '-inkey',
    'broker.key',
    '-certfile',
    'ca.pem',
    '-name',
    'broker',
    '-out',
    'broker.p12',
    '-passout',
    `pass:${keystorePassword}`,
  ]);
  return {
    dir,
    caPem: join(dir, 'ca.pem'),
    brokerKeystore: join(dir, 'broker.p12'),
    keystorePassword,
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client.key'),
    otherCaPem: join(dir, 'other-ca.pem'),
  };
}
