/**
 * The floor programs: the least a Deno program can do for each job the
 * helper does, written out here so every ratio in the report compares
 * berth-acquire with a program anyone can read in full, started the same
 * way (`deno run` with the permission set and the V8 flags the CLI gets) and
 * measured in the same run.
 *
 * @module
 */

/** A program that starts and exits: the floor of `check` and `acquire`. */
export const EMPTY = "Deno.exit(0);\n";

/**
 * The sidecar's floor: acquire once, then per beat one `fetch` POST of a
 * Renew on a kept-alive connection (with `Deno.createHttpClient({ caCerts })`
 * when given a CA file) and one atomic write of the marker with fsync.
 *
 * Arguments: `URL NAMESPACE NAME HOLDER TTL HEARTBEAT_S DIR [CA_FILE]`.
 */
export const RENEW =
  `const [url, ns, name, holder, ttl, hb, dir, ca] = Deno.args;
const client = ca
  ? Deno.createHttpClient({ caCerts: [Deno.readTextFileSync(ca)] })
  : undefined;
const base = url + "/v1alpha1/namespaces/" + ns + "/leases/" + name + "/";
async function post(rpc, body) {
  const r = await fetch(base + rpc, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    client,
  });
  const j = await r.json();
  if (!r.ok || !j.acquired) throw new Error(rpc + ": " + r.status);
  return j;
}
const ttlSeconds = Number(ttl);
const { fencingToken } = await post("acquire", { holder, ttlSeconds });
const text = new TextEncoder();
for (;;) {
  await new Promise((r) => setTimeout(r, Number(hb) * 1000));
  const j = await post("renew", { holder, fencingToken, ttlSeconds });
  const tmp = dir + "/.healthy.tmp";
  const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
  await f.write(text.encode(j.expiresAt + "\\n"));
  await f.sync();
  f.close();
  await Deno.rename(tmp, dir + "/healthy");
}
`;

/**
 * The least an uncontended `acquire` does: one `fetch` POST of an Acquire
 * (with `Deno.createHttpClient({ caCerts })` when given a CA file), one
 * write of the token, exit. Not the floor for `acquire` (that is the
 * empty program); printed beside it to show what one lease request costs
 * any Deno program, TLS start-up included.
 *
 * Arguments: `URL NAMESPACE NAME HOLDER TTL DIR [CA_FILE]`.
 */
export const ACQUIRE = `const [url, ns, name, holder, ttl, dir, ca] = Deno.args;
const client = ca
  ? Deno.createHttpClient({ caCerts: [Deno.readTextFileSync(ca)] })
  : undefined;
const r = await fetch(url + "/v1alpha1/namespaces/" + ns + "/leases/" + name + "/acquire", {
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ holder, ttlSeconds: Number(ttl) }),
  client,
});
const j = await r.json();
if (!r.ok || !j.acquired) Deno.exit(1);
await Deno.writeTextFile(dir + "/token", String(j.fencingToken));
Deno.exit(0);
`;

/**
 * The health endpoint's floor: a listener that answers every request `200
 * ok`, as `/healthz` does while the lease is held. Argument: `PORT`.
 */
export const HEALTH =
  `Deno.serve({ hostname: "127.0.0.1", port: Number(Deno.args[0]), onListen() {} }, () => new Response("ok\\n"));
`;

/**
 * Writes the floor programs into `dir` and returns their paths. They are
 * TypeScript files like the helper's (`deno run` does not type-check them).
 */
export async function writeFloors(
  dir: string,
): Promise<
  { empty: string; acquire: string; renew: string; health: string }
> {
  const paths = {
    empty: `${dir}/floor-empty.ts`,
    acquire: `${dir}/floor-acquire.ts`,
    renew: `${dir}/floor-renew.ts`,
    health: `${dir}/floor-health.ts`,
  };
  await Deno.writeTextFile(paths.empty, EMPTY);
  await Deno.writeTextFile(paths.acquire, ACQUIRE);
  await Deno.writeTextFile(paths.renew, RENEW);
  await Deno.writeTextFile(paths.health, HEALTH);
  return paths;
}
