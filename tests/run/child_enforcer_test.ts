import assert from "node:assert/strict";
import { ProbeEnforcer } from "../../lib/enforce/enforcer.ts";
import { createLogger } from "../../lib/obs/log.ts";
import { ChildEnforcer, removeMarkers } from "../../lib/run/child_enforcer.ts";
import type { ProcessGroup } from "../../lib/gate/process_group.ts";
import { FakeMarker } from "../support/fake_marker.ts";
import { settle } from "../support/fake_clock.ts";

/** The markers of `run`, kept in memory. */
const markers = () =>
  new ProbeEnforcer({
    marker: new FakeMarker(),
    logger: createLogger({ format: "json", write: () => {} }),
  });

Deno.test("child: a stop still running is `stopping` and never stopped when the bound aborts; stopped once it finished and the command is gone", async () => {
  let finish = () => {};
  const child = {
    stop: () => new Promise<void>((resolve) => finish = resolve),
  } as unknown as ProcessGroup;
  const enforcer = new ChildEnforcer(markers());
  enforcer.attach(child);
  await enforcer.close("lease lost");
  const bound = new AbortController();
  const e = enforcer.workloadStopped(bound.signal);
  bound.abort();
  assert.deepEqual(await e, {
    stopped: false,
    detail: "the command is still being stopped",
    stopping: true,
  });
  finish();
  await settle();
  enforcer.detach(child);
  assert.deepEqual(await enforcer.workloadStopped(AbortSignal.abort()), {
    stopped: true,
    detail: "the command has exited",
  });
  await enforcer.dispose();
});

Deno.test("child: workloadStopped is stopped with no command and no stop pending, even with its bound already passed", async () => {
  const enforcer = new ChildEnforcer(markers());
  await enforcer.close("lease lost");
  assert.deepEqual(await enforcer.workloadStopped(AbortSignal.abort()), {
    stopped: true,
    detail: "the command has exited",
  });
});

Deno.test("child: a marker that cannot be removed does not keep the others from being removed", async () => {
  const removed: string[] = [];
  const dir = (name: string, fail = false) => ({
    removeMarker: () => {
      if (fail) return Promise.reject(new Error(`${name}: read-only volume`));
      removed.push(name);
      return Promise.resolve();
    },
  });
  await assert.rejects(
    removeMarkers([dir("user", true), dir("fence")]),
    /user: read-only volume/,
  );
  assert.deepEqual(removed, ["fence"]);
});
