// The logger's default sink: a log line that cannot be written (stderr
// closed, the container runtime's log pipe gone) must not throw into the
// code that logs before it acts, such as closing the gate.
import assert from "node:assert/strict";

Deno.test("a log line to a closed stderr is dropped, and the caller goes on", async () => {
  const logModule = new URL("../../lib/obs/log.ts", import.meta.url).href;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "eval",
      `import { createLogger } from ${JSON.stringify(logModule)};
       Deno.stderr.close();
       const logger = createLogger({});
       logger.warn("gate closed: stopping the workload", { reason: "test" });
       console.log("went on");`,
    ],
    stdout: "piped",
    stderr: "null",
    signal: AbortSignal.timeout(30_000),
  }).output();
  assert.equal(new TextDecoder().decode(out.stdout), "went on\n");
  assert.equal(out.code, 0);
});
