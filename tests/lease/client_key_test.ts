/**
 * The API key at the client boundary: a server that echoes it never gets it
 * into an outcome, and a key-file read that blocks never holds a request
 * past its bound.
 */
import assert from "node:assert/strict";
import { ApiKeySource } from "../../lib/lease/api_key.ts";
import type { GrantOutcome } from "../../lib/lease/rpc.ts";
import { createLogger, Secret } from "../../lib/obs/log.ts";
import { FakeClock } from "../support/fake_clock.ts";
import { waitFor } from "../support/wait.ts";
import {
  both,
  client,
  GRANT,
  header,
  HOLDER,
  json,
  never,
  type Recorded,
  type Reply,
  startServer,
} from "./client_fixture.ts";

both(
  "a server echoing the Authorization header never gets the key into an outcome",
  async () => {
    const KEY_TEXT = "tenant:" + "s3cr3t-".repeat(40); // longer than any excerpt
    const echo = (r: Recorded) => header(r, "Authorization") ?? "";
    const replies: ((r: Recorded) => Reply)[] = [
      (r) => ({ status: 401, body: `denied: ${echo(r)}` }),
      (r) => json(401, { error: `bad header ${echo(r)}` }),
      (r) => json(200, { ...GRANT, acquired: false, holder: echo(r) }),
      (r) => json(200, { ...GRANT, holder: echo(r) }),
      (r) => ({ status: 200, body: `{"acquired":"${echo(r)}"}` }),
      (r) => ({
        status: 307,
        headers: { Location: `https://x/?k=${encodeURIComponent(echo(r))}` },
      }),
      (r) => json(500, { error: "internal error", requestId: echo(r) }),
    ];
    let i = 0;
    await using srv = await startServer((r) => replies[i++](r));
    const c = client(srv.url, {
      auth: ApiKeySource.fromSecret(new Secret(KEY_TEXT)),
    });
    const outs: unknown[] = [];
    for (let n = 0; n < replies.length; n++) {
      outs.push(await c.acquire(HOLDER, 1, never()));
    }
    const text = JSON.stringify(outs);
    assert.ok(!text.includes("s3cr3t"), text);
    assert.match(text, /\[redacted API key\]/);
    // acquired:true naming another holder (here: the echo) is never held.
    assert.equal((outs[3] as GrantOutcome).kind, "bad-response");
  },
);

both(
  "a blocked key-file read: the request goes with the last good key after REREAD_WAIT_MS, well before the read's bound, which is reported once it passes",
  async () => {
    const dir = await Deno.makeTempDir();
    try {
      const file = `${dir}/key`;
      await Deno.writeTextFile(file, "k1\n");
      const gates: PromiseWithResolvers<Uint8Array>[] = [];
      let block = false;
      const lines: string[] = [];
      const clock = new FakeClock();
      const auth = await ApiKeySource.fromFile(file, {
        clock,
        logger: createLogger({ write: (l) => lines.push(l) }),
        readFile: (p) => {
          if (!block) return Deno.readFile(p);
          const gate = Promise.withResolvers<Uint8Array>();
          gates.push(gate);
          return gate.promise;
        },
      });
      block = true; // every later read hangs, as on a hung mount
      await clock.advance(1000); // a re-read is due
      await using srv = await startServer(() => json(200, GRANT));
      const sending = client(srv.url, { auth }).acquire(HOLDER, 1, never());
      await clock.advance(100);
      const sent = await sending;
      assert.equal(sent.kind, "acquired", JSON.stringify(sent));
      assert.equal(header(srv.requests[0], "Authorization"), "Bearer k1");
      assert.ok(!lines.some((l) => l.includes("did not finish")));
      await clock.advance(1900);
      await waitFor(
        () => lines.some((l) => l.includes("did not finish within 2000 ms")),
        { timeoutMs: 10_000, what: "the slow read to be reported" },
      );
      for (const g of gates) g.resolve(new TextEncoder().encode("k2"));
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);
