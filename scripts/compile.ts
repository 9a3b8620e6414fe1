/**
 * `deno task compile`: builds the standalone `berth-acquire` binaries that
 * users download and that the container image ships, and a `SHA256SUMS` file
 * to verify them with. It exists so that the one place that decides how the
 * binary is compiled (permission set and V8 flags, both from
 * lib/cmd/self_argv.ts; code cache, targets, file names) is shared by the
 * release download, the Dockerfile's build stage and the tests.
 *
 * Usage: `deno task compile [--target TRIPLE]... [--out-dir DIR]`. Without
 * `--target` it builds every triple in {@linkcode TARGETS}. The binaries go
 * to `DIR/berth-acquire-<version>-<target>` (version from deno.json) and
 * their checksums, in `sha256sum` format, to `DIR/SHA256SUMS`
 * (`cd DIR && sha256sum -c SHA256SUMS` verifies them). `DIR` defaults to
 * `dist/` in the checkout.
 *
 * `deno compile` downloads Deno's `denort` runtime for each target on first
 * use (then caches it in `DENO_DIR`); where that download is unreachable the
 * script says so and exits 1.
 *
 * @module
 */
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { ON_DEMAND_MODULES } from "../main.ts";
import { PERMISSION_SET, V8_FLAGS_ARG } from "../lib/cmd/self_argv.ts";

/**
 * The triples a release is built for: the glibc Linux platforms Kubernetes
 * nodes run. musl is not offered because Deno publishes no musl runtime.
 */
export const TARGETS = [
  "x86_64-unknown-linux-gnu",
  "aarch64-unknown-linux-gnu",
] as const;

/** One of {@linkcode TARGETS}; a type so a typo in a triple fails `deno check`. */
export type Target = typeof TARGETS[number];

/** Where binaries go when `--out-dir` is not given, relative to the checkout. */
export const DEFAULT_OUT_DIR = "dist";

/** The name of the checksum file written next to the binaries. */
export const SUMS_FILE = "SHA256SUMS";

/** The checkout's root (holding deno.json and main.ts), as a path. */
const REPO_ROOT = decodeURIComponent(new URL("..", import.meta.url).pathname)
  .replace(/\/+$/, "");

/**
 * The file name of one release binary. Version and target are both in the
 * name so that downloads of different releases or platforms never overwrite
 * each other and a checksum line says which build it covers.
 */
export function binaryName(version: string, target: Target): string {
  return `berth-acquire-${version}-${target}`;
}

/** Options of {@linkcode compileArgs}. */
export interface CompileArgsOptions {
  /** The triple to build for. */
  target: Target;
  /** The binary's path. */
  output: string;
  /** The deno.json holding the permission set; its directory is the project root. */
  config: string;
  /** The program's entry module (main.ts). */
  entry: string;
}

/**
 * The arguments after `deno` that compile one binary. Kept as a pure function
 * so a test can check, without compiling, that the binary gets exactly the
 * permission set and V8 flags the development run gets and that the V8 code
 * cache is off
 * (a compiled binary would otherwise try to write the cache at run time,
 * which fails on the read-only root file system of the image).
 *
 * main.ts loads each subcommand's module with `import(specifier)` of a
 * variable, which `deno compile` cannot follow, so every module in its
 * `ON_DEMAND_MODULES` is passed with `--include`, resolved against the entry
 * module's directory (the binary resolves them the same way at run time).
 */
export function compileArgs(o: CompileArgsOptions): string[] {
  const includes = ON_DEMAND_MODULES.flatMap((m) => [
    "--include",
    join(dirname(o.entry), m),
  ]);
  return [
    "compile",
    "-q",
    `-P=${PERMISSION_SET}`,
    V8_FLAGS_ARG,
    "--no-code-cache",
    "--config",
    o.config,
    ...includes,
    "--target",
    o.target,
    "--output",
    o.output,
    o.entry,
  ];
}

/**
 * The content of a checksum file in the format `sha256sum -c` reads: one
 * `<hex>  <file name>` line per binary, sorted by name so that the file is
 * the same whatever order the targets were built in.
 */
export function formatSha256Sums(
  entries: { name: string; sha256: string }[],
): string {
  return [...entries]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .map((e) => `${e.sha256}  ${e.name}\n`)
    .join("");
}

/** The lowercase hex SHA-256 of a file's bytes, as `sha256sum` prints it. */
export async function sha256File(path: string): Promise<string> {
  const digest = await crypto.subtle.digest(
    "SHA-256",
    await Deno.readFile(path),
  );
  return new Uint8Array(digest).toHex();
}

/**
 * Whether `deno compile`'s error output says it could not fetch its `denort`
 * runtime (as opposed to a type error or a bad argument). The script uses it
 * to tell the user what to do, and the compile test uses it to report itself
 * as skipped rather than passed or failed where the download is unreachable.
 */
export function isRuntimeDownloadFailure(stderr: string): boolean {
  return /Setting up base binary|denort-[\w-]+\.zip/.test(stderr) &&
    /error sending request|dns error|connect|timed out|download/i.test(stderr);
}

/** Reads the project version from deno.json so the binary names follow releases. */
async function readVersion(config: string): Promise<string> {
  const parsed = JSON.parse(await Deno.readTextFile(config)) as {
    version?: unknown;
  };
  if (
    typeof parsed.version !== "string" ||
    !/^[0-9A-Za-z.+-]+$/.test(parsed.version)
  ) {
    throw new Error(
      `${config}: "version" must be a string like "0.1.0" (it names the binaries); found ${
        JSON.stringify(parsed.version)
      }`,
    );
  }
  return parsed.version;
}

const USAGE = `Usage: deno task compile [--target TRIPLE]... [--out-dir DIR]

Builds berth-acquire-<version>-<target> binaries and a ${SUMS_FILE} file.

  --target TRIPLE   build only this target (repeatable); one of:
                    ${TARGETS.join(", ")}
                    default: all of them
  --out-dir DIR     where to write the binaries and ${SUMS_FILE};
                    default ${DEFAULT_OUT_DIR}/ in the checkout
  --help            show this help`;

/** Runs the build; returns the exit code. */
export async function main(args: string[]): Promise<number> {
  let targets: Target[];
  let outDir: string;
  try {
    const { values } = parseArgs({
      args,
      options: {
        target: { type: "string", multiple: true },
        "out-dir": { type: "string" },
        help: { type: "boolean" },
      },
      strict: true,
      allowPositionals: false,
    });
    if (values.help) {
      console.log(USAGE);
      return 0;
    }
    targets = [];
    for (const t of values.target ?? TARGETS) {
      if (!(TARGETS as readonly string[]).includes(t)) {
        throw new Error(
          `unknown target ${JSON.stringify(t)}; use one of ${
            TARGETS.join(", ")
          }`,
        );
      }
      if (!targets.includes(t as Target)) targets.push(t as Target);
    }
    outDir = values["out-dir"] ?? `${REPO_ROOT}/${DEFAULT_OUT_DIR}`;
    if (outDir === "") throw new Error("--out-dir is empty");
  } catch (e) {
    console.error(`compile: ${(e as Error).message}\n\n${USAGE}`);
    return 1;
  }

  const config = `${REPO_ROOT}/deno.json`;
  const version = await readVersion(config);
  await Deno.mkdir(outDir, { recursive: true });
  const built: { name: string; sha256: string }[] = [];
  for (const target of targets) {
    const name = binaryName(version, target);
    const output = `${outDir}/${name}`;
    console.error(`compile: ${target} -> ${output}`);
    const result = await new Deno.Command(Deno.execPath(), {
      args: compileArgs({
        target,
        output,
        config,
        entry: `${REPO_ROOT}/main.ts`,
      }),
      stdin: "null",
      stdout: "inherit",
      stderr: "piped",
    }).output();
    const stderr = new TextDecoder().decode(result.stderr);
    const offline = !result.success && isRuntimeDownloadFailure(stderr);
    // Offline, deno's own error (a Rust error chain and a backtrace) only
    // hides the one line that says what to do.
    if (stderr !== "" && !offline) await Deno.stderr.write(result.stderr);
    if (!result.success) {
      if (offline) {
        console.error(
          `compile: deno compile could not download the Deno runtime (denort) for ${target}. ` +
            `Build where Deno's release downloads are reachable (the Dockerfile's build stage is one such place), ` +
            `or set DENORT_BIN to a denort binary of Deno ${Deno.version.deno} for ${target}.`,
        );
      } else {
        console.error(
          `compile: deno compile failed for ${target} (exit ${result.code}); see its messages above.`,
        );
      }
      return 1;
    }
    built.push({ name, sha256: await sha256File(output) });
  }
  await Deno.writeTextFile(`${outDir}/${SUMS_FILE}`, formatSha256Sums(built));
  console.error(`compile: wrote ${outDir}/${SUMS_FILE}`);
  return 0;
}

if (import.meta.main) {
  Deno.exit(await main(Deno.args));
}
