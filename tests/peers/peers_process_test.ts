/**
 * The peer tier: this project's development server and helper side by side
 * with the upstream Berth API server and Go helper (docs/peer-tests.md). It
 * runs when `BERTH_PEER_APISERVER` and `BERTH_PEER_HELPER` name those
 * binaries and otherwise skips with one printed line.
 *
 * @module
 */
import { registerAcquireSuite } from "./acquire_suite.ts";
import { registerApiSuite } from "./api_suite.ts";
import { registerCheckSuite } from "./check_suite.ts";
import { registerMixedPodsSuite } from "./mixed_pods_suite.ts";
import { peerSkipReason } from "./peers.ts";

const ignore = peerSkipReason() !== undefined;

registerApiSuite(ignore);
registerAcquireSuite(ignore);
registerCheckSuite(ignore);
registerMixedPodsSuite(ignore);
