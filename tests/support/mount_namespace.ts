/**
 * Running a shell script in a private mount namespace (`unshare --mount`), as
 * root, for tests that mount over what a process sees; they are skipped with
 * the reason elsewhere.
 *
 * @module
 */

/** Why a mount namespace cannot be made here (`what` names the need), or undefined. */
export function mountNamespaceUnavailable(what: string): string | undefined {
  if (Deno.uid() !== 0) return `needs root (${what})`;
  const out = new Deno.Command("unshare", {
    args: ["--mount", "--propagation", "private", "true"],
    stderr: "piped",
  }).outputSync();
  if (out.success) return undefined;
  return `needs a working unshare --mount: ${
    new TextDecoder().decode(out.stderr).trim()
  }`;
}

/** Runs `script` with `args` (`$1`...) under `/bin/sh` in a private mount namespace. */
export async function inMountNamespace(script: string, args: string[]) {
  const out = await new Deno.Command("unshare", {
    args: [
      "--mount",
      "--propagation",
      "private",
      "/bin/sh",
      "-c",
      script,
      "sh",
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  return {
    code: out.code,
    stdout: new TextDecoder().decode(out.stdout),
    stderr: new TextDecoder().decode(out.stderr),
  };
}
