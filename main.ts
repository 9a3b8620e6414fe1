/**
 * `berth-acquire`: the CLI. It only dispatches on the first argument. The
 * liveness probe (`check`, started every 2 s in every guarded container) is
 * imported statically: its few small modules are all it loads, and a static
 * import costs its every start less than loading the same modules on demand
 * (about 0.5 MiB of peak RSS under `deno run`). Every other subcommand's
 * module is loaded on demand, so the probe pays for none of them.
 *
 * Those modules are named in {@linkcode COMMANDS} and loaded with
 * `import(specifier)` of a variable, not of a string literal: Deno follows
 * literal dynamic imports when it builds the program's module graph at start,
 * so under `deno run` every start (the probe's too) would read and hash every
 * module of every subcommand. `deno compile` does not see such imports either,
 * so scripts/compile.ts passes each of {@linkcode ON_DEMAND_MODULES} with
 * `--include`.
 *
 * @module
 */

import { main as check } from "./lib/cmd/check.ts";

/** The probe's subcommand, imported statically (see the module doc). */
export const PROBE_COMMAND = "check";

/**
 * The subcommands loaded on demand and the module each one loads, relative
 * to this file. One entry per line; each module exports
 * `main(args): Promise<number>`.
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

/**
 * Every module this file loads on demand, relative to it: what a compiled
 * binary must embed besides main.ts.
 */
export const ON_DEMAND_MODULES: readonly string[] = [
  ...Object.values(COMMANDS),
  VERSION_MODULE,
];

/** What every module in {@linkcode COMMANDS} exports. */
interface Subcommand {
  main(args: string[]): Promise<number>;
}

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
  if (sub === PROBE_COMMAND) return await check(rest);
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
  const command = await import(COMMANDS[sub]) as Subcommand;
  return command.main(rest);
}

if (import.meta.main) {
  Deno.exit(await run(Deno.args));
}
