/**
 * One pod of {@linkcode derivePod} laid out on this machine, so the real
 * helpers run as the kubelet would run them: each volume is a directory
 * whose files have the owners and modes the kubelet gives them, each
 * container sees its volumes through bind mounts (read-only where the
 * kubelet mounts them read-only) in a mount namespace of its own
 * (`unshare --mount`), and runs under its user, groups and capabilities
 * (`setpriv`).
 *
 * Paths: a container sees a volume mounted at `/berth` at
 * `<root>/containers/<name>/berth`, so every path in its environment and
 * argv that lies under one of its mounts is rewritten to that prefix
 * ({@linkcode PodOnNode.hostPath}); nothing outside the temp dir is touched.
 *
 * Under `deno run` the helper is `deno` reading this checkout, so the user
 * it runs as must be able to read the program: the sources (`deno.json`,
 * `main.ts`, `lib/`) are copied into the temp dir, world-readable, and each
 * container gets a `DENO_DIR` of its own, owned by its user (the compiled
 * binary needs neither).
 *
 * Needs root, `unshare` and `setpriv`; {@linkcode nodeUnavailable} says why
 * not when they are missing.
 *
 * @module
 */
import { shellQuote } from "../../lib/state/state_dir.ts";
import type { ContainerView, PodView } from "./kubelet.ts";
import { ROOT } from "./readers.ts";
import { checkoutArgv } from "../../lib/cmd/self_argv.ts";

/**
 * Why the stand-in cannot run here, or undefined when it can: it needs
 * root, and `unshare` and `setpriv` that work (a container without
 * CAP_SYS_ADMIN has the tools but may not make a mount namespace), so each
 * is tried once the way {@linkcode PodOnNode.command} uses it.
 */
export function nodeUnavailable(): string | undefined {
  if (Deno.uid() !== 0) return "needs root (to chown files and switch users)";
  const tries: [string, string[]][] = [
    ["unshare", [
      "--mount",
      "--propagation",
      "private",
      "--pid",
      "--fork",
      "--kill-child",
      "--mount-proc",
      "/bin/sh",
      "-c",
      "mount --bind /tmp /tmp && mount -o remount,bind,ro /tmp",
    ]],
    ["setpriv", ["--reuid=65532", "--regid=65532", "--clear-groups", "true"]],
  ];
  for (const [tool, args] of tries) {
    try {
      const out = new Deno.Command(tool, {
        args,
        stdout: "null",
        stderr: "piped",
      }).outputSync();
      if (!out.success) {
        return `needs a working ${tool}: ${tool} ${args.join(" ")} failed: ${
          new TextDecoder().decode(out.stderr).trim()
        }`;
      }
    } catch (e) {
      return `needs ${tool} (util-linux): ${(e as Error).message}`;
    }
  }
  return undefined;
}

/** A pod's volumes and containers laid out in a temp dir; removed on dispose. */
export class PodOnNode implements AsyncDisposable {
  private constructor(
    /** The temp dir holding everything. */
    readonly root: string,
    readonly pod: PodView,
  ) {}

  /**
   * Lays `pod` out under a new temp dir: the sources, the volumes, each
   * container's mount points and `DENO_DIR`.
   *
   * @param pod The pod as the kubelet runs it.
   * @returns The laid-out pod; dispose it to remove the temp dir.
   */
  static async create(pod: PodView): Promise<PodOnNode> {
    const root = await Deno.makeTempDir({ prefix: "berth-kubelet-" });
    await Deno.chmod(root, 0o755);
    const node = new PodOnNode(root, pod);
    const src = `${root}/src`;
    await Deno.mkdir(`${src}/lib`, { recursive: true });
    for (const f of ["deno.json", "main.ts"]) {
      await Deno.copyFile(`${ROOT}/${f}`, `${src}/${f}`);
    }
    await copyTree(`${ROOT}/lib`, `${src}/lib`);
    for (const v of pod.volumes) {
      const base = `${root}/volumes/${v.name}`;
      await Deno.mkdir(`${root}/volumes`, { recursive: true });
      for (const e of v.entries) {
        const p = e.path === "" ? base : `${base}/${e.path}`;
        if (e.kind === "symlink") {
          await Deno.symlink(e.target!, p);
          continue;
        }
        if (e.kind === "dir") await Deno.mkdir(p);
        else await Deno.writeTextFile(p, e.content ?? "");
        await Deno.chown(p, e.uid, e.gid);
        await Deno.chmod(p, e.mode);
      }
    }
    for (const c of pod.containers) {
      for (const m of c.mounts) {
        await Deno.mkdir(node.hostPath(c, m.mountPath), { recursive: true });
      }
      const denoDir = node.#denoDir(c);
      await Deno.mkdir(denoDir, { recursive: true });
      await Deno.chown(denoDir, c.ids.uid, c.ids.gid);
    }
    return node;
  }

  /** Where a path the container sees lies on this machine (unchanged when under none of its mounts). */
  hostPath(c: ContainerView, path: string): string {
    const under = c.mounts.some((m) =>
      path === m.mountPath || path.startsWith(`${m.mountPath}/`)
    );
    return under ? `${this.root}/containers/${c.name}${path}` : path;
  }

  #denoDir(c: ContainerView): string {
    return `${this.root}/deno-dir/${c.name}`;
  }

  /**
   * The argv that runs the berth CLI in the container, as its image's
   * entrypoint would: `deno run` on the copied sources with the binary's
   * permission set.
   */
  berthArgv(args: string[]): string[] {
    return checkoutArgv(`${this.root}/src`, args);
  }

  /**
   * A command that runs `argv` inside container `c`: its mounts, its ids,
   * its environment (paths under its mounts rewritten, `overrides` on top).
   *
   * @param c The container.
   * @param argv The program and its arguments, as the container sees them.
   * @param overrides Variables to set or replace (e.g. the API server's URL).
   * @returns A command with stdout and stderr piped, stdin closed.
   */
  command(
    c: ContainerView,
    argv: string[],
    overrides: Record<string, string> = {},
  ): Deno.Command {
    const env: Record<string, string> = {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      DENO_DIR: this.#denoDir(c),
      NO_COLOR: "1",
    };
    for (const [k, v] of Object.entries(c.env)) {
      env[k] = v.startsWith("/") ? this.hostPath(c, v) : v;
    }
    Object.assign(env, overrides);
    const lines = ["set -e"];
    for (const m of c.mounts) {
      const dst = shellQuote(this.hostPath(c, m.mountPath));
      const src = shellQuote(`${this.root}/volumes/${m.volume}`);
      lines.push(`mount --bind ${src} ${dst}`);
      if (m.readOnly) lines.push(`mount -o remount,bind,ro ${dst}`);
    }
    const ids = c.ids;
    const priv = [
      "setpriv",
      `--reuid=${ids.uid}`,
      `--regid=${ids.gid}`,
      ids.groups.length ? `--groups=${ids.groups.join(",")}` : "--clear-groups",
      ...(ids.noNewPrivs ? ["--no-new-privs"] : []),
      "--inh-caps=-all",
      `--bounding-set=-all${ids.caps.map((x) => `,+${x}`).join("")}`,
      "--",
      ...argv.map((a) => a.startsWith("/") ? this.hostPath(c, a) : a),
    ];
    lines.push(`exec ${priv.map(shellQuote).join(" ")}`);
    return new Deno.Command("unshare", {
      // A PID namespace of its own, as a container has: in signal mode the
      // sidecar scans /proc for its target, and must never find (and
      // signal) a process of this machine.
      args: [
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
        "/bin/sh",
        "-c",
        lines.join("\n"),
      ],
      env,
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    });
  }

  /** Removes the temp dir. */
  async [Symbol.asyncDispose](): Promise<void> {
    await Deno.remove(this.root, { recursive: true }).catch(() => {});
  }
}

/**
 * The process inside the container that `child` (a {@linkcode
 * PodOnNode.command}) runs: `unshare --fork` blocks SIGTERM while it waits,
 * so a graceful stop must be sent to its child, the container's PID 1.
 *
 * @param child The spawned command.
 * @returns The host PID of the container's first process.
 * @throws {Error} When it has not started yet or has exited.
 */
export function containerPid(child: Deno.ChildProcess): number {
  const text = Deno.readTextFileSync(
    `/proc/${child.pid}/task/${child.pid}/children`,
  ).trim();
  if (!/^\d+$/.test(text)) {
    throw new Error(
      `unshare ${child.pid} has no single child: ${JSON.stringify(text)}`,
    );
  }
  return Number(text);
}

async function copyTree(from: string, to: string): Promise<void> {
  for await (const e of Deno.readDir(from)) {
    if (e.isDirectory) {
      await Deno.mkdir(`${to}/${e.name}`);
      await copyTree(`${from}/${e.name}`, `${to}/${e.name}`);
    } else if (e.isFile) {
      await Deno.copyFile(`${from}/${e.name}`, `${to}/${e.name}`);
      await Deno.chmod(`${to}/${e.name}`, 0o644);
    }
  }
  await Deno.chmod(to, 0o755);
}
