// Runs a function with console.log silenced: for tests that drive a tool which prints its report.
//
// Owns: `quietly(fn)`. Restores console.log whatever fn does.

export async function quietly<T>(fn: () => Promise<T>): Promise<T> {
  const log = console.log;
  console.log = () => undefined;
  try {
    return await fn();
  } finally {
    console.log = log;
  }
}
