/**
 * The one default the probe shares with the other roles: where the state
 * volume is mounted. A module of its own, with no imports, because the probe
 * (`check`, started every 2 s in every guarded container) loads it and must
 * not load the configuration.
 *
 * @module
 */

/** The state directory the webhook mounts when nothing else is configured. */
export const DEFAULT_STATE_DIR = "/berth";
