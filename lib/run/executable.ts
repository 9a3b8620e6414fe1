/**
 * Whether a command can be executed, checked before anything is acquired:
 * `run -- nosuchcmd` should say so at once, with the shell's exit status,
 * rather than take the lease, hand it over and only then fail to start. The
 * check follows what `execvp` does (a name with a slash is a path; otherwise
 * each `PATH` entry in order, an empty entry meaning the current directory),
 * so its answer matches what the start would find. The start itself still
 * reports its own error: the file can change in between.
 *
 * @module
 */
import {
  EXIT_CANNOT_EXECUTE,
  EXIT_COMMAND_NOT_FOUND,
  SpawnError,
} from "../gate/process_group.ts";

/**
 * Finds `command` as the start will, and says why it cannot be executed.
 *
 * @param command The command's first word, as given after `--`.
 * @param path The search path; default `PATH` of this process.
 * @returns Undefined when an executable file was found; else the error the
 *   start would give, carrying exit status 127 (not found) or 126 (found,
 *   but a directory or without an execute bit).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * assert.equal(executableProblem("nosuchcmd", "/nonexistent")?.exitCode, 127);
 * assert.equal(executableProblem("sh"), undefined); // found on PATH
 * ```
 */
export function executableProblem(
  command: string,
  path: string = Deno.env.get("PATH") ?? "",
): SpawnError | undefined {
  const candidates = command.includes("/")
    ? [command]
    : path.split(":").map((dir) => `${dir === "" ? "." : dir}/${command}`);
  let found: string | undefined;
  for (const candidate of candidates) {
    let info: Deno.FileInfo;
    try {
      info = Deno.statSync(candidate);
    } catch {
      continue;
    }
    if (info.isFile && ((info.mode ?? 0o111) & 0o111) !== 0) return undefined;
    found ??= info.isDirectory
      ? `${candidate} is a directory`
      : `${candidate} has no execute permission`;
  }
  if (found !== undefined) {
    return new SpawnError(
      command,
      EXIT_CANNOT_EXECUTE,
      new Error(found),
    );
  }
  return new SpawnError(
    command,
    EXIT_COMMAND_NOT_FOUND,
    new Error(
      command.includes("/") ? "no such file" : "not found in PATH",
    ),
  );
}
