/**
 * The process relay inside a simulated pod's PID namespace (see
 * `NamespaceHost` in sim/host.ts): it reads commands as JSON lines on stdin
 * (`spawn`, `kill`), starts and signals the pod's processes from inside the
 * namespace, and reports `spawned`, `line` and `exit` events as JSON lines on
 * stdout. It exists because a process can only be placed in a PID namespace
 * by a process already inside it. When stdin closes it kills everything it
 * started and exits.
 *
 * @module
 */
import { type HostedProcess, spawnLocal } from "./host.ts";

const encoder = new TextEncoder();

function emit(ev: Record<string, unknown>): void {
  const bytes = encoder.encode(JSON.stringify(ev) + "\n");
  let off = 0;
  while (off < bytes.length) off += Deno.stdout.writeSync(bytes.subarray(off));
}

interface SpawnCommand {
  op: "spawn";
  id: number;
  argv: string[];
  env: Record<string, string>;
  keepStdinOpen: boolean;
}

interface KillCommand {
  op: "kill";
  id: number;
  signal: Deno.Signal;
}

async function main(): Promise<void> {
  const live = new Map<number, HostedProcess>();
  const exits: Promise<unknown>[] = [];
  emit({ ev: "ready" });
  const lines = Deno.stdin.readable.pipeThrough(new TextDecoderStream());
  let rest = "";
  for await (const chunk of lines) {
    rest += chunk;
    let nl: number;
    while ((nl = rest.indexOf("\n")) >= 0) {
      const cmd = JSON.parse(rest.slice(0, nl)) as SpawnCommand | KillCommand;
      rest = rest.slice(nl + 1);
      if (cmd.op === "kill") {
        live.get(cmd.id)?.kill(cmd.signal);
        continue;
      }
      const id = cmd.id;
      let p: HostedProcess;
      try {
        p = spawnLocal({
          argv: cmd.argv,
          env: cmd.env,
          keepStdinOpen: cmd.keepStdinOpen,
          onLine: (stream, line) => emit({ ev: "line", id, stream, line }),
        });
      } catch (e) {
        emit({ ev: "spawn-failed", id, message: (e as Error).message });
        continue;
      }
      live.set(id, p);
      emit({ ev: "spawned", id, pid: p.pid });
      exits.push(p.exited.then((x) => {
        live.delete(id);
        emit({ ev: "exit", id, ...x });
      }));
    }
  }
  for (const p of live.values()) p.kill("SIGKILL");
  await Promise.allSettled(exits);
}

if (import.meta.main) {
  await main();
  Deno.exit(0);
}
