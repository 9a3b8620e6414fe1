/**
 * The floor programs: the least a Deno program can do for each job the
 * helper does, written out here so every ratio in the report compares
 * berth-acquire with a program anyone can read in full, started the same
 * way (`deno run -P=berth-acquire`) and measured in the same run.
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
): Promise<{ empty: string; renew: string; health: string }> {
  const paths = {
    empty: `${dir}/floor-empty.ts`,
    renew: `${dir}/floor-renew.ts`,
    health: `${dir}/floor-health.ts`,
  };
  await Deno.writeTextFile(paths.empty, EMPTY);
  await Deno.writeTextFile(paths.renew, RENEW);
  await Deno.writeTextFile(paths.health, HEALTH);
  return paths;
}
