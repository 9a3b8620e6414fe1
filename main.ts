/**
 * `berth-acquire`: dispatches on the first argument. The probe (`check`) is
 * imported statically; every other subcommand's module is named in
 * {@linkcode COMMANDS} and imported through a variable, which neither Deno's
 * start-up module graph nor `deno compile` follows, so the probe loads none
 * of them (docs/development.md). scripts/compile.ts passes each of
 * {@linkcode ON_DEMAND_MODULES} with `--include`.
 *
 * @module
 */

import { main as check } from "./lib/cmd/check.ts";

/** The probe's subcommand, imported statically. */
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
    console.error(
      `berth-acquire: unknown subcommand ${JSON.stringify(sub)}\n\n${USAGE}`,
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
