/** Output: a `--json` document on stdout, or text for a person (aligned tables). */

/** Where a command writes. */
export interface Output {
  /** One line (or block) on stdout. */
  print(text: string): void
  /** A line on stderr (warnings, progress). */
  note(text: string): void
  /** Whether stderr is a terminal (progress lines are drawn there only). */
  readonly interactive: boolean
  /** Whether stdout is a terminal (`watch` clears the screen there only). */
  readonly screen: boolean
}

/**
 * `text` safe to write to a terminal, and one to one, so that what is shown names one key when pasted back (the
 * key arguments read these escapes: `keyArgument` in args.ts): a backslash as `\\`; C0 and C1 control characters
 * and DEL as `\xHH` (so a key or a reason cannot set the terminal's title, colours or clear it, nor break a line);
 * lone surrogates, format characters (Unicode category Cf: the bidi overrides and isolates U+202A–U+202E,
 * U+2066–U+2069, the zero-width U+200B–U+200F, U+FEFF...), the line and paragraph separators, every space but
 * U+0020, the default-ignorable code points (U+115F and U+3164 Hangul fillers, variation selectors, U+034F...) and
 * U+2800 (a blank braille pattern) as `\uHHHH` (so a key cannot pass for another: `user\u202e` reversing what
 * follows, `admin\u200b` or `vip:1\u00a0` showing as `admin` or `vip:1`). Anything else is left as it is.
 * `--json` leaves all of this to JSON, for programs to read (it escapes control characters and lone surrogates).
 */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (found) => {
    if (found === '\\') return '\\\\'
    const code = found.codePointAt(0)!
    const hex = code.toString(16)
    return code < 0x100
      ? `\\x${hex.padStart(2, '0')}`
      : code > 0xffff
        ? `\\u{${hex}}`
        : `\\u${hex.padStart(4, '0')}`
  })
}

/**
 * A backslash, a C0 control, DEL, a C1 control, a format character (Cf), a line or paragraph separator, a space
 * other than U+0020, a default-ignorable code point, U+2800, or a surrogate not in a pair (with the `u` flag a pair
 * is one code point, outside the surrogates' range).
 */
const UNPRINTABLE =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it finds
  /\\|[\u0000-\u001f\u007f-\u009f]|\p{Cf}|\p{Zl}|\p{Zp}|(?! )\p{Zs}|\p{Default_Ignorable_Code_Point}|\u2800|[\ud800-\udfff]/gu

/** An aligned text table: a header row, then the rows; numbers aligned right; text cells `printable`. */
export function table(header: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  const cells = [header, ...rows].map((row) => row.map((cell) => printable(String(cell))))
  const widths = header.map((_, column) => Math.max(...cells.map((row) => row[column]!.length)))
  return cells
    .map((row, r) =>
      row
        .map((cell, column) => {
          const numeric = r > 0 && typeof rows[r - 1]![column] === 'number'
          return numeric ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!)
        })
        .join('  ')
        .trimEnd(),
    )
    .join('\n')
}

/** Milliseconds as a person reads them: `850ms`, `12s`, `4m10s`, `2h5m`, `3d`. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`
  const s = Math.round(ms / 1000)
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? `${s % 60}s` : ''}`
  if (s < 86_400)
    return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60) ? `${Math.floor((s % 3600) / 60)}m` : ''}`
  return `${Math.round(s / 86_400)}d`
}

/** A progress line on stderr, redrawn in place, when stderr is a terminal; `done()` clears it. */
export function progressLine(output: Output, label: string): { update(count: number): void; done(): void } {
  if (!output.interactive) return { update() {}, done() {} }
  return {
    update: (count) => output.note(`\r${label} ${count.toLocaleString('en-US')}…\u001b[K`),
    done: () => output.note('\r\u001b[K'),
  }
}
