/**
 * `berth-acquire`: the CLI. It only dispatches on the first argument and
 * loads the subcommand's module on demand, so the liveness probe (`check`,
 * started every 2 s in every guarded container) pays for nothing but itself.
 *
 * @module
 */

/** The subcommands and the module each one loads. */
const COMMANDS: Record<
  string,
  () => Promise<{ main(args: string[]): Promise<number> }>
> = {
  check: () => import("./lib/cmd/check.ts"),
  acquire: () => import("./lib/cmd/acquire.ts"),
  renew: () => import("./lib/cmd/renew.ts"),
  run: () => import("./lib/cmd/run.ts"),
  status: () => import("./lib/cmd/status.ts"),
  gate: () => import("./lib/cmd/gate.ts"),
  "dev-server": () => import("./lib/cmd/dev_server.ts"),
};

const USAGE = `berth-acquire: hold a Berth lease for a Kubernetes workload

Usage:
  berth-acquire acquire [flags]              init container: block until the lease is held
  berth-acquire renew [flags]                sidecar: keep the lease, stop the workload on loss
  berth-acquire check [PATH] [--max-age D]   liveness probe: is the health marker fresh?
  berth-acquire run [flags] -- CMD [ARGS]    hold the lease while CMD runs; stop it when lost
  berth-acquire status [STATE_DIR] [--json]  read-only view: holder, token, verdict, time left
  berth-acquire gate [flags] -- CMD [ARGS]   main container: run CMD only while the marker passes
  berth-acquire dev-server [flags]           a DEVELOPMENT lease server (in memory, not for production)
  berth-acquire --version | --help

Run "berth-acquire <subcommand> --help" for the flags of one subcommand.
Configuration comes from BERTH_* environment variables, overridden by flags.
`;

async function run(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === "--version" || sub === "version") {
    const { VERSION } = await import("./lib/version.ts");
    console.log(`berth-acquire ${VERSION}`);
    return 0;
  }
  if (sub === undefined || sub === "--help" || sub === "-h" || sub === "help") {
    (sub === undefined ? console.error : console.log)(USAGE);
    return sub === undefined ? 1 : 0;
  }
  const load = COMMANDS[sub];
  if (!load) {
    console.error(
      `berth-acquire: unknown subcommand ${JSON.stringify(sub)}\n\n${USAGE}`,
    );
    return 1;
  }
  return (await load()).main(rest);
}

if (import.meta.main) {
  Deno.exit(await run(Deno.args));
}
