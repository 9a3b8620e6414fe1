/**
 * The help text of the configuration flags, generated from the settings
 * table so that `acquire`, `renew` and `run` print one text that cannot
 * disagree with the parser; a role states only what differs for it (`run`'s
 * lead default, the settings it does not take).
 *
 * @module
 */
import type { ExtraFlag } from "./flags.ts";
import type { LeadDefault } from "./lead.ts";
import { CONFIG_SETTINGS, type ConfigFlagName } from "./settings.ts";

/** What differs in one role's help text. */
export interface HelpOptions {
  /** The enforce lead default to state; default: the settings table's (the enforcer's). */
  leadDefault?: LeadDefault;
  /** Settings the role does not offer, left out of its text. */
  omit?: readonly ConfigFlagName[];
  /** Defaults stated differently for this role, by flag. */
  defaults?: Partial<Record<ConfigFlagName, string>>;
}

function helpEntry(
  flag: string,
  value: string | undefined,
  help: string,
  note: string,
): string {
  return `  --${flag}${value ?? ""}\n        ${help}${
    note ? ` [${note}]` : ""
  }\n`;
}

/**
 * The help text for the configuration flags, each with its env variable and
 * default.
 *
 * @param options What differs for the role.
 * @returns The text, a heading and one entry per setting.
 */
export function configFlagsHelp(options: HelpOptions = {}): string {
  const omit = new Set<string>(options.omit ?? []);
  const defaults: Partial<Record<string, string>> = {
    ...(options.leadDefault
      ? { "enforce-lead-seconds": options.leadDefault.text }
      : {}),
    ...options.defaults,
  };
  return "Configuration (env first; a flag given explicitly overrides it):\n" +
    CONFIG_SETTINGS.filter((s) => !omit.has(s.flag)).map((s) =>
      helpEntry(
        s.flag,
        s.kind === "boolean" ? `[=${s.value}]` : ` ${s.value}`,
        s.help,
        `env ${s.env}; default: ${defaults[s.flag] ?? s.default}`,
      )
    ).join("");
}

/**
 * Formats a subcommand's own flags in the style of
 * {@linkcode configFlagsHelp}, so a usage text reads as one list.
 *
 * @param extraOptions The subcommand's flags, by name.
 * @returns One entry per flag.
 */
export function formatExtraFlagsHelp(
  extraOptions: Record<string, ExtraFlag>,
): string {
  return Object.entries(extraOptions).map(([name, spec]) =>
    helpEntry(
      name,
      spec.type === "boolean" ? undefined : ` ${spec.value ?? "VALUE"}`,
      spec.help ?? "",
      spec.short ? `or -${spec.short}` : "",
    )
  ).join("");
}
