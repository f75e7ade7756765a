import type { SluiceConfig } from '../config/schema.js';
import { SluiceError } from '../errors.js';
import type { Topology } from '../topology/build.js';

/**
 * Checks the job against `overload`: dropping at the operator needs `.shed()` points, and
 * priority drops need each of them to say how to rank records. Called once at start.
 */
export function validateOverload(topology: Topology, config: Readonly<SluiceConfig['overload']>): void {
  if (config.mode === 'backpressure' || config.placement !== 'operator') return;
  const points = topology.subtopologies.flatMap((s) => s.nodes).filter((n) => n.spec.kind === 'shed');
  if (points.length === 0) {
    throw new SluiceError(
      'SLUICE_CONFIG_INVALID',
      `overload.placement is 'operator' but the job has no .shed() point; add .shed() before the expensive operators or use placement 'source'`,
    );
  }
  if (config.drop === 'priority') {
    const without = points.filter((n) => n.spec.kind === 'shed' && n.spec.priority === undefined);
    if (without.length > 0) {
      throw new SluiceError(
        'SLUICE_CONFIG_INVALID',
        `overload.drop is 'priority' but .shed() point(s) ${without.map((n) => n.name).join(', ')} have no priority function; pass .shed({ priority: (value) => number })`,
      );
    }
  }
}
