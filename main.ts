/**
 * `berth-acquire`: dispatches on the first argument, and answers the
 * webhook's probe itself. The probe starts every 2 s in the workload's
 * container, so `check PATH --max-age 30s` loads only this module and the
 * marker; every subcommand's module, `check` with any other arguments
 * included, is named in {@linkcode COMMANDS} and imported through a variable,
 * which neither Deno's start-up module graph nor `deno compile` follows
 * (docs/development.md); scripts/compile.ts passes each of
 * {@linkcode ON_DEMAND_MODULES} with `--include`.
 *
 * @module
 */
import {
  probe,
  WEBHOOK_PROBE_MAX_AGE,
  WEBHOOK_PROBE_MAX_AGE_MS,
} from "./lib/state/marker.ts";

/** The probe's subcommand, whose webhook form this module answers itself. */
export const PROBE_COMMAND = "check";

/**
 * Every subcommand's module, relative to this file, one a line; each exports
 * `main(args)`, which returns the exit status or a promise of it.
 */
export const COMMANDS: Readonly<Record<string, string>> = {
  [PROBE_COMMAND]: "./lib/cmd/check.ts",
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

/** The one argument parser, for a misspelt subcommand's nearest name. */
const ARGV_MODULE = "./lib/config/argv.ts";

/** What a compiled binary must embed besides main.ts. */
export const ON_DEMAND_MODULES: readonly string[] = [
  ...Object.values(COMMANDS),
  VERSION_MODULE,
  ARGV_MODULE,
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

/**
 * The webhook's probe, `check PATH --max-age 30s`, answered without loading
 * the argument parser or durations: what the parser makes of those arguments
 * (`lib/cmd/check.ts` reads every other form of `check`).
 */
function webhookProbe(args: string[]): number | undefined {
  const [path, flag, maxAge] = args;
  if (
    args.length !== 3 || flag !== "--max-age" ||
    maxAge !== WEBHOOK_PROBE_MAX_AGE || path === "" || path.startsWith("-")
  ) return undefined;
  return probe(path, WEBHOOK_PROBE_MAX_AGE_MS);
}

async function run(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
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
    const { nearest } = await import(ARGV_MODULE) as {
      nearest(given: string, known: readonly string[]): string | undefined;
    };
    const near = nearest(sub, Object.keys(COMMANDS));
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
    main(args: string[]): number | Promise<number>;
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
  const probed = Deno.args[0] === PROBE_COMMAND
    ? webhookProbe(Deno.args.slice(1))
    : undefined;
  Deno.exit(probed ?? await run(Deno.args));
}
