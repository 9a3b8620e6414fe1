/**
 * The exit statuses every subcommand shares (docs/exit-codes.md has the whole
 * table). The Go helper's subcommands (`acquire`, `renew`, `check`) exit 1 on
 * every failure, usage errors included, as the Go helper does; the
 * subcommands it does not have (`run`, `gate`, `status`, `dev-server`) exit 78
 * (sysexits `EX_CONFIG`) on a usage or configuration error, clear of their
 * other statuses and of a command's own.
 *
 * @module
 */

/** Any failure of `acquire`, `renew` or `check`, as the Go helper exits. */
export const EXIT_FAILURE = 1;

/** A usage or configuration error of `run`, `gate`, `status` or `dev-server`. */
export const EXIT_USAGE = 78;
