export async function resetCommand(_argv: string[]): Promise<number> {
  process.stderr.write('sluice reset: not available yet\n');
  return 1;
}
