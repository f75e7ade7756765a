/** The value after `--name` among the command's arguments, or undefined. */
export function optionValue(
  name: string,
  argv: readonly string[] = process.argv.slice(2),
): string | undefined {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}
