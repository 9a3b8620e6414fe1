/**
 * `berth-acquire`: dispatches on the first argument, and is the liveness
 * probe (`check`) itself: the probe starts every 2 s in the workload's
 * container, so it loads only this module, the argument parser, durations and
 * the marker. Every other subcommand's module is named in {@linkcode COMMANDS}
 * and imported through a variable, which neither Deno's start-up module graph
 * nor `deno compile` follows (docs/development.md); scripts/compile.ts passes
 * each of {@linkcode ON_DEMAND_MODULES} with `--include`.
 *
 * @module
 */
import {
  CONFIG_FLAG_KINDS,
  DEFAULT_STATE_DIR,
  isSet,
  lastValue,
  nearest,
  parseArgv,
  usageLine,
} from "./lib/config/argv.ts";
import { parseDurationMs } from "./lib/config/duration.ts";
import { examineMarker } from "./lib/state/marker.ts";

/** The probe's subcommand, this module's own. */
export const PROBE_COMMAND = "check";

/**
 * The subcommands loaded on demand and their modules, relative to this file,
 * one a line; each exports `main(args): Promise<number>`.
 */
export const COMMANDS: Readonly<Record<string, string>> = {
  acquire: "./lib/cmd/acquire.ts",
  renew: "./lib/cmd/renew.ts",
  run: "./lib/run/run.ts",
  status: "./lib/cmd/status.ts",
  gate: "./lib/gate/gate.ts",
  "dev-server": "./lib/cmd/dev_server.ts",
  "install-check": "./lib/cmd/install_check.ts",
};

/** The module `--version` loads (it exports `VERSION`). */
export const VERSION_MODULE = "./lib/version.ts";

/** What a compiled binary must embed besides main.ts. */
export const ON_DEMAND_MODULES: readonly string[] = [
  ...Object.values(COMMANDS),
  VERSION_MODULE,
];

const USAGE = `berth-acquire: hold a Berth lease for a Kubernetes workload

Usage:
  berth-acquire acquire [flags]              init container: block until the lease is held
  berth-acquire renew [flags]                sidecar: keep the lease, stop the workload on loss
  berth-acquire check [PATH] [--max-age D]   liveness probe: is the health marker fresh?
  berth-acquire run [flags] -- CMD [ARGS]    hold the lease while CMD runs; stop it when lost
  berth-acquire status [STATE_DIR] [--json]  read-only view: holder, token, verdict, time left
  berth-acquire gate [flags] -- CMD [ARGS]   main container: run CMD only while the marker passes
  berth-acquire dev-server [flags]           a DEVELOPMENT lease server (in memory, not for production)
  berth-acquire install-check [--from FILE] [STATE_DIR]
                                             install the probe so it runs in any main image
  berth-acquire --version | --help

Run "berth-acquire <subcommand> --help" for the flags of one subcommand.
Configuration comes from BERTH_* environment variables, overridden by flags.
`;

const CHECK_USAGE =
  `Usage: berth-acquire check [MARKER-PATH] [--max-age DURATION] [--state-dir DIR]

Liveness probe: exit 0 when the health marker is present and fresh, else print
one line and exit 1 (a usage error exits 1 too: the probe fails closed).

  MARKER-PATH           the marker file; absent or empty: <state dir>/healthy
  --max-age DURATION    largest accepted age of the marker's mtime, a Go
                        duration (30s, 1m0s, 1.5s, 300ms); 0, negative or
                        absent: presence only
  --state-dir DIR       state directory for the default path; env
                        BERTH_STATE_DIR; default ${DEFAULT_STATE_DIR}
  --help                show this help

The other roles' flags (--lease-name, --ttl-seconds, ...) are accepted and
ignored, as the Go helper accepts them.`;

/**
 * `check`: the exec liveness probe the webhook puts on every main container
 * (`/berth/check check /berth/healthy --max-age 30s`, every 2 s). Exit 0
 * silently when the marker passes; else one line on stdout (the kubelet shows
 * it in the pod's events) and exit 1, usage errors too: a probe that cannot
 * understand its arguments fails closed. It reads no setting but
 * `BERTH_STATE_DIR`, so the other roles' settings, missing in the main
 * container, never fail it.
 */
function check(args: string[]): number {
  let path: string;
  let maxAgeMs = 0;
  try {
    const argv = parseArgv(args, {
      flags: {
        "max-age": { kind: "value", wants: "a duration such as 30s" },
        "state-dir": { kind: "value", wants: "a directory" },
        help: { kind: "boolean", short: "h" },
      },
      // The other roles' flags are skipped with their values (renew's
      // --health-addr too); its own --state-dir comes first.
      ignored: { ...CONFIG_FLAG_KINDS, "health-addr": "value" },
      positionals: 1,
      positionalHint: "check takes one marker path",
      dashDash: "positionals",
    });
    if (isSet(argv, "help")) {
      console.log(CHECK_USAGE);
      return 0;
    }
    const maxAge = lastValue(argv, "max-age");
    if (maxAge !== undefined) {
      maxAgeMs = parseDurationMs(maxAge, "--max-age", { negative: "zero" });
    }
    // An empty path or state directory counts as absent, as in Go.
    path = argv.positionals[0] ||
      `${
        (lastValue(argv, "state-dir") || Deno.env.get("BERTH_STATE_DIR") ||
          DEFAULT_STATE_DIR).replace(/\/+$/, "")
      }/healthy`;
  } catch (e) {
    console.log(usageLine("check", (e as Error).message));
    return 1;
  }
  const verdict = examineMarker(path, { maxAgeMs });
  if (verdict.kind === "OK") return 0;
  console.log(verdict.reason);
  return 1;
}

async function run(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === PROBE_COMMAND) return check(rest);
  if (sub === "--version" || sub === "version") {
    const { VERSION } = await import(VERSION_MODULE) as { VERSION: string };
    console.log(`berth-acquire ${VERSION}`);
    return 0;
  }
  if (sub === undefined || sub === "--help" || sub === "-h" || sub === "help") {
    (sub === undefined ? console.error : console.log)(USAGE);
    return sub === undefined ? 1 : 0;
  }
  if (!Object.hasOwn(COMMANDS, sub)) {
    const near = nearest(sub, [PROBE_COMMAND, ...Object.keys(COMMANDS)]);
    console.error(
      `berth-acquire: unknown subcommand ${JSON.stringify(sub)}${
        near === undefined
          ? `\n\n${USAGE}`
          : `: did you mean ${near}? (run "berth-acquire --help" for the list)`
      }`,
    );
    return 1;
  }
  const command = await import(COMMANDS[sub]) as {
    main(args: string[]): Promise<number>;
  };
  return command.main(rest);
}

// Run as the program, not when imported or tested. The probe is told by its
// argv without `import.meta`, whose making costs every probe start memory.
if (
  Deno.build.standalone ||
  (Deno.args[0] === PROBE_COMMAND && Deno.mainModule.endsWith("/main.ts")) ||
  import.meta.main
) {
  Deno.exit(await run(Deno.args));
}
