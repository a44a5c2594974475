// Makes invisible and deceptive characters visible to a reviewer: the same rules and
// tables as toolguard/_reveal.py (tests/test_page_reveal.py checks that both agree).
// Bidi controls, zero-width and other invisible characters, control characters, lone
// surrogates, a Cyrillic letter inside a Latin word, a whole word of look-alike letters,
// and non-ASCII characters in an address or path are shown escaped as \uXXXX (JSON's
// notation, so the escaped JSON parses back to exactly the same data) and listed in a
// warning. Defines the global `toolguardReveal`; it never touches the DOM.
"use strict";

(() => {
  const ALWAYS = [
    [0x0000, 0x0000, "NULL"],
    [0x0001, 0x0006, "CONTROL CHARACTER"],
    [0x0007, 0x0007, "BELL"],
    [0x0008, 0x0008, "BACKSPACE"],
    [0x0009, 0x0009, "CHARACTER TABULATION"],
    [0x000a, 0x000a, "LINE FEED"],
    [0x000b, 0x000c, "CONTROL CHARACTER"],
    [0x000d, 0x000d, "CARRIAGE RETURN"],
    [0x000e, 0x001a, "CONTROL CHARACTER"],
    [0x001b, 0x001b, "ESCAPE"],
    [0x001c, 0x001f, "CONTROL CHARACTER"],
    [0x007f, 0x007f, "DELETE"],
    [0x0080, 0x0084, "CONTROL CHARACTER"],
    [0x0085, 0x0085, "NEXT LINE"],
    [0x0086, 0x009a, "CONTROL CHARACTER"],
    [0x009b, 0x009b, "CONTROL SEQUENCE INTRODUCER"],
    [0x009c, 0x009f, "CONTROL CHARACTER"],
    [0x00ad, 0x00ad, "SOFT HYPHEN"],
    [0x034f, 0x034f, "COMBINING GRAPHEME JOINER"],
    [0x037e, 0x037e, "GREEK QUESTION MARK"],
    [0x061c, 0x061c, "ARABIC LETTER MARK"],
    [0x115f, 0x115f, "HANGUL CHOSEONG FILLER"],
    [0x1160, 0x1160, "HANGUL JUNGSEONG FILLER"],
    [0x17b4, 0x17b5, "KHMER INHERENT VOWEL"],
    [0x180b, 0x180d, "MONGOLIAN FREE VARIATION SELECTOR"],
    [0x180e, 0x180e, "MONGOLIAN VOWEL SEPARATOR"],
    [0x180f, 0x180f, "MONGOLIAN FREE VARIATION SELECTOR"],
    [0x200b, 0x200b, "ZERO WIDTH SPACE"],
    [0x200c, 0x200c, "ZERO WIDTH NON-JOINER"],
    [0x200d, 0x200d, "ZERO WIDTH JOINER"],
    [0x200e, 0x200e, "LEFT-TO-RIGHT MARK"],
    [0x200f, 0x200f, "RIGHT-TO-LEFT MARK"],
    [0x2028, 0x2028, "LINE SEPARATOR"],
    [0x2029, 0x2029, "PARAGRAPH SEPARATOR"],
    [0x202a, 0x202a, "LEFT-TO-RIGHT EMBEDDING"],
    [0x202b, 0x202b, "RIGHT-TO-LEFT EMBEDDING"],
    [0x202c, 0x202c, "POP DIRECTIONAL FORMATTING"],
    [0x202d, 0x202d, "LEFT-TO-RIGHT OVERRIDE"],
    [0x202e, 0x202e, "RIGHT-TO-LEFT OVERRIDE"],
    [0x2060, 0x2060, "WORD JOINER"],
    [0x2061, 0x2061, "FUNCTION APPLICATION"],
    [0x2062, 0x2062, "INVISIBLE TIMES"],
    [0x2063, 0x2063, "INVISIBLE SEPARATOR"],
    [0x2064, 0x2064, "INVISIBLE PLUS"],
    [0x2065, 0x2065, "INVISIBLE FORMAT CHARACTER"],
    [0x2066, 0x2066, "LEFT-TO-RIGHT ISOLATE"],
    [0x2067, 0x2067, "RIGHT-TO-LEFT ISOLATE"],
    [0x2068, 0x2068, "FIRST STRONG ISOLATE"],
    [0x2069, 0x2069, "POP DIRECTIONAL ISOLATE"],
    [0x206a, 0x206f, "DEPRECATED FORMAT CHARACTER"],
    [0x2800, 0x2800, "BRAILLE PATTERN BLANK"],
    [0x3164, 0x3164, "HANGUL FILLER"],
    [0xd800, 0xdfff, "LONE SURROGATE"],
    [0xfe00, 0xfe0f, "VARIATION SELECTOR"],
    [0xfeff, 0xfeff, "ZERO WIDTH NO-BREAK SPACE"],
    [0xffa0, 0xffa0, "HALFWIDTH HANGUL FILLER"],
    [0xfff0, 0xfff8, "INVISIBLE FORMAT CHARACTER"],
    [0xfff9, 0xfffb, "INTERLINEAR ANNOTATION CHARACTER"],
    [0xfffd, 0xfffd, "REPLACEMENT CHARACTER"],
    [0x1bca0, 0x1bca3, "SHORTHAND FORMAT CONTROL"],
    [0x1d173, 0x1d17a, "MUSICAL SYMBOL FORMAT CHARACTER"],
    [0xe0000, 0xe00ff, "TAG CHARACTER"],
    [0xe0100, 0xe01ef, "VARIATION SELECTOR"],
    [0xe01f0, 0xe0fff, "INVISIBLE FORMAT CHARACTER"],
  ];

  const SCRIPTS = [
    [
      "Latin",
      [
        [0x0041, 0x005a],
        [0x0061, 0x007a],
        [0x00c0, 0x00d6],
        [0x00d8, 0x00f6],
        [0x00f8, 0x02af],
        [0x1d00, 0x1d25],
        [0x1e00, 0x1eff],
        [0x2c60, 0x2c7f],
        [0xa722, 0xa7ff],
        [0xab30, 0xab64],
        [0xfb00, 0xfb06],
        [0xff21, 0xff3a],
        [0xff41, 0xff5a],
      ],
    ],
    [
      "Cyrillic",
      [
        [0x0400, 0x0481],
        [0x048a, 0x052f],
        [0x1c80, 0x1c88],
        [0xa640, 0xa66e],
        [0xa67f, 0xa69b],
      ],
    ],
    [
      "Greek",
      [
        [0x0370, 0x0373],
        [0x0376, 0x0377],
        [0x037b, 0x037d],
        [0x037f, 0x037f],
        [0x0386, 0x0386],
        [0x0388, 0x03ff],
        [0x1d26, 0x1d2a],
        [0x1f00, 0x1ffc],
      ],
    ],
  ];

  const LOOKALIKES =
    // Cyrillic letters that look like Latin ones
    "аеіјкорсухѕԁһӏԛԝүАВЕІЈКМНОРСТУХЅҮԚԜҺӀ" +
    // Greek letters that look like Latin ones
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαικνορυ";

  const SEPARATORS =
    "\t\n\x0b\x0c\r \"'(),;<>[]`{|}" +
    "\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" +
    "\u2028\u2029\u202f\u205f\u3000";

  const WARNING_HEADER =
    "⚠ This action contains invisible or look-alike characters (shown escaped as \\uXXXX):";
  const WARNING_LIMIT = 20;
  const KEY_LIMIT = 40;
  const PATH_LIMIT = 8;
  const SHORT_ESCAPES = new Map([
    [0x08, "\\b"],
    [0x09, "\\t"],
    [0x0a, "\\n"],
    [0x0c, "\\f"],
    [0x0d, "\\r"],
  ]);
  const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;

  const codePointsOf = (text) => Array.from(text, (ch) => ch.codePointAt(0));
  const LOOKALIKE_SET = new Set(codePointsOf(LOOKALIKES));
  const SEPARATOR_SET = new Set(codePointsOf(SEPARATORS));
  const SCRIPT_RANGES = SCRIPTS.flatMap(([name, ranges]) => ranges.map(([a, b]) => [a, b, name]))
    .sort((x, y) => x[0] - y[0]);
  const SCRIPT_ORDER = new Map(SCRIPTS.map(([name], i) => [name, i]));

  const TABLES = Object.freeze({
    always: ALWAYS,
    scripts: SCRIPTS,
    lookalikes: codePointsOf(LOOKALIKES),
    separators: codePointsOf(SEPARATORS),
    warningHeader: WARNING_HEADER,
    warningLimit: WARNING_LIMIT,
    keyLimit: KEY_LIMIT,
    pathLimit: PATH_LIMIT,
  });

  // The entry of a sorted [start, end, ...] table holding cp, or null.
  function lookup(table, cp) {
    let lo = 0;
    let hi = table.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (cp < table[mid][0]) hi = mid - 1;
      else if (cp > table[mid][1]) lo = mid + 1;
      else return table[mid];
    }
    return null;
  }

  const alwaysName = (cp) => lookup(ALWAYS, cp)?.[2] ?? null;
  const scriptOf = (cp) => lookup(SCRIPT_RANGES, cp)?.[2] ?? null;
  const isAsciiLetter = (cp) => (cp >= 0x41 && cp <= 0x5a) || (cp >= 0x61 && cp <= 0x7a);
  const isAsciiAlnum = (cp) => isAsciiLetter(cp) || (cp >= 0x30 && cp <= 0x39);
  const hex4 = (n) => n.toString(16).padStart(4, "0");
  const u = (cp) => `U+${hex4(cp).toUpperCase()}`;

  function escapeCodePoint(cp) {
    const short = SHORT_ESCAPES.get(cp);
    if (short !== undefined) return short;
    if (cp > 0xffff) {
      const v = cp - 0x10000;
      return `\\u${hex4(0xd800 + (v >> 10))}\\u${hex4(0xdc00 + (v & 0x3ff))}`;
    }
    return `\\u${hex4(cp)}`;
  }

  function isAddress(cps, start, end) {
    let letter = false;
    for (let k = start; k < end; k += 1) if (isAsciiLetter(cps[k])) letter = true;
    if (!letter) return false;
    for (let k = start; k < end; k += 1) {
      const cp = cps[k];
      if (cp === 0x40 || cp === 0x2f || cp === 0x5c) return true;
      if (
        cp === 0x2e &&
        k > start &&
        k < end - 1 &&
        isAsciiAlnum(cps[k - 1]) &&
        isAsciiAlnum(cps[k + 1])
      ) {
        return true;
      }
    }
    return false;
  }

  // Map of code point index -> what it is, for the suspicious characters of cps.
  function scanCodePoints(cps, singleLine, letters) {
    const flags = new Map();
    cps.forEach((cp, i) => {
      const name = alwaysName(cp);
      if (name === null || (!singleLine && (cp === 0x09 || cp === 0x0a))) return;
      if (
        (cp === 0xfe0e || cp === 0xfe0f) &&
        i > 0 &&
        cps[i - 1] >= 0x2000 &&
        alwaysName(cps[i - 1]) === null
      ) {
        return; // one emoji or text presentation selector after a symbol
      }
      flags.set(i, `${u(cp)} ${name}`);
    });
    if (!letters) return flags;
    const scripts = cps.map(scriptOf);
    const hasLatin = scripts.includes("Latin");
    const n = cps.length;
    let i = 0;
    while (i < n) {
      if (scripts[i] === null) {
        i += 1;
        continue;
      }
      let j = i;
      const counts = new Map();
      while (j < n && scripts[j] !== null) {
        counts.set(scripts[j], (counts.get(scripts[j]) ?? 0) + 1);
        j += 1;
      }
      if (counts.size > 1) {
        let main = null;
        for (const [script, count] of counts) {
          if (
            main === null ||
            count > counts.get(main) ||
            (count === counts.get(main) && SCRIPT_ORDER.get(script) < SCRIPT_ORDER.get(main))
          ) {
            main = script;
          }
        }
        for (let k = i; k < j; k += 1) {
          if (scripts[k] !== main && !flags.has(k)) {
            const ch = String.fromCodePoint(cps[k]);
            flags.set(k, `${scripts[k]} letter ${ch} (${u(cps[k])}) mixed into a ${main} word`);
          }
        }
      } else if (hasLatin && scripts[i] !== "Latin") {
        let all = true;
        for (let k = i; k < j; k += 1) if (!LOOKALIKE_SET.has(cps[k])) all = false;
        if (all) {
          const word = String.fromCodePoint(...cps.slice(i, Math.min(j, i + KEY_LIMIT)));
          const more = j - i > KEY_LIMIT ? "…" : "";
          const what = `${scripts[i]} word ${word}${more} that looks Latin`;
          for (let k = i; k < j; k += 1) if (!flags.has(k)) flags.set(k, what);
        }
      }
      i = j;
    }
    i = 0;
    while (i < n) {
      if (SEPARATOR_SET.has(cps[i])) {
        i += 1;
        continue;
      }
      let j = i;
      while (j < n && !SEPARATOR_SET.has(cps[j])) j += 1;
      if (isAddress(cps, i, j)) {
        for (let k = i; k < j; k += 1) {
          const cp = cps[k];
          if (cp > 0x7f && !flags.has(k)) {
            const shown = scripts[k]
              ? `letter ${String.fromCodePoint(cp)} (${u(cp)})`
              : `character ${u(cp)}`;
            flags.set(k, `non-ASCII ${shown} in an address or path`);
          }
        }
      }
      i = j;
    }
    return flags;
  }

  // Segments are [text, what] pairs: plain text has what === null; an escaped
  // character is its own segment. Neighbouring plain text is merged.
  function add(out, text) {
    if (!text) return;
    const last = out[out.length - 1];
    if (last && last[1] === null) last[0] += text;
    else out.push([text, null]);
  }

  function pushText(out, cps, flags, quoted) {
    let plain = "";
    cps.forEach((cp, i) => {
      const what = flags.get(i);
      if (what !== undefined) {
        add(out, plain);
        plain = "";
        out.push([escapeCodePoint(cp), what]);
      } else if (quoted && (cp === 0x22 || cp === 0x5c)) {
        plain += `\\${String.fromCodePoint(cp)}`;
      } else if (quoted && cp < 0x20) {
        plain += escapeCodePoint(cp);
      } else {
        plain += String.fromCodePoint(cp);
      }
    });
    add(out, plain);
  }

  const joined = (segments) => segments.map((segment) => segment[0]).join("");

  function findingsOf(flags, where) {
    const found = [];
    let lastIndex = -2;
    let lastWhat = "";
    for (const i of Array.from(flags.keys()).sort((a, b) => a - b)) {
      const what = flags.get(i);
      if (!(i - 1 === lastIndex && what === lastWhat)) found.push({ what, where });
      lastIndex = i;
      lastWhat = what;
    }
    return found;
  }

  function scan(text, { singleLine = false, letters = true } = {}) {
    return scanCodePoints(codePointsOf(text), singleLine, letters);
  }

  function textSegments(text, { singleLine = false, letters = true } = {}) {
    const cps = codePointsOf(text);
    const out = [];
    pushText(out, cps, scanCodePoints(cps, singleLine, letters), false);
    return out;
  }

  function keyLabel(key) {
    if (key.length <= KEY_LIMIT && IDENTIFIER.test(key)) return `.${key}`;
    const cps = codePointsOf(key);
    const cut = cps.slice(0, KEY_LIMIT);
    const out = [];
    pushText(out, cut, scanCodePoints(cut, true, true), true);
    const more = cps.length > KEY_LIMIT ? "…" : "";
    return `["${joined(out)}${more}"]`;
  }

  function whereOf(path) {
    const shown = path.length > PATH_LIMIT ? [...path.slice(0, 3), ".…", ...path.slice(-4)] : path;
    return `args${shown.join("")}`;
  }

  function scalar(value) {
    if (value === null || value === undefined) return "null";
    if (typeof value === "number" || typeof value === "boolean") return JSON.stringify(value);
    return JSON.stringify(String(value));
  }

  // Pretty JSON like JSON.stringify(value, null, indent), suspicious characters escaped.
  function jsonSegments(value, indent, findings) {
    const out = [];
    const pad = " ".repeat(indent ?? 0);
    const stack = [];

    function string(text, where, key) {
      const cps = codePointsOf(text);
      const flags = scanCodePoints(cps, key, true);
      findings.push(...findingsOf(flags, where));
      add(out, '"');
      pushText(out, cps, flags, true);
      add(out, '"');
    }

    function open(item, depth, path) {
      if (typeof item === "string") {
        string(item, whereOf(path), false);
      } else if (Array.isArray(item)) {
        if (item.length === 0) add(out, "[]");
        else {
          add(out, "[");
          stack.push({ entries: item.map((v, i) => [i, v]), next: 0, depth: depth + 1, close: "]", path });
        }
      } else if (item !== null && typeof item === "object") {
        const entries = Object.entries(item);
        if (entries.length === 0) add(out, "{}");
        else {
          add(out, "{");
          stack.push({ entries, next: 0, depth: depth + 1, close: "}", path });
        }
      } else {
        add(out, scalar(item));
      }
    }

    open(value, 0, []);
    while (stack.length > 0) {
      const frame = stack[stack.length - 1];
      if (frame.next >= frame.entries.length) {
        stack.pop();
        add(out, (indent ? `\n${pad.repeat(frame.depth - 1)}` : "") + frame.close);
        continue;
      }
      const [key, item] = frame.entries[frame.next];
      if (indent) add(out, (frame.next === 0 ? "\n" : ",\n") + pad.repeat(frame.depth));
      else if (frame.next > 0) add(out, ", ");
      frame.next += 1;
      if (frame.close === "}") {
        string(key, `a key in ${whereOf(frame.path)}`, true);
        add(out, ": ");
        open(item, frame.depth, [...frame.path, keyLabel(key)]);
      } else {
        open(item, frame.depth, [...frame.path, `[${key}]`]);
      }
    }
    return out;
  }

  function revealJson(value, indent = 2) {
    return joined(jsonSegments(value, indent, []));
  }

  function revealAction(name, args, description) {
    const findings = [];
    const nameCps = codePointsOf(String(name ?? ""));
    const nameFlags = scanCodePoints(nameCps, true, true);
    findings.push(...findingsOf(nameFlags, "the tool name"));
    const descCps = codePointsOf(String(description ?? ""));
    const descFlags = scanCodePoints(descCps, true, true);
    findings.push(...findingsOf(descFlags, "the description"));
    const nameOut = [];
    pushText(nameOut, nameCps, nameFlags, false);
    const descOut = [];
    pushText(descOut, descCps, descFlags, false);
    const argsOut = jsonSegments(args ?? {}, 2, findings);
    return { name: nameOut, description: descOut, args: argsOut, findings };
  }

  function warningLines(findings, limit = WARNING_LIMIT) {
    if (findings.length === 0) return [];
    const counts = new Map();
    for (const { what, where } of findings) {
      const key = JSON.stringify([what, where]);
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    const items = Array.from(counts, ([key, count]) => {
      const [what, where] = JSON.parse(key);
      return `${what} in ${where}${count > 1 ? ` (${count} times)` : ""}`;
    });
    const lines = [WARNING_HEADER, ...items.slice(0, limit)];
    if (items.length > limit) lines.push(`… and ${items.length - limit} more`);
    return lines;
  }

  globalThis.toolguardReveal = Object.freeze({
    TABLES,
    scan: (text, options) => Object.fromEntries(scan(text, options)),
    textSegments,
    revealJson,
    revealAction,
    warningLines,
    joined,
  });
})();
