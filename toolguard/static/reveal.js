// Makes invisible and deceptive characters visible to a reviewer: the same rules and
// tables as toolguard/_core/reveal.py (tests/page/test_reveal.py checks that both agree).
// Bidi controls, zero-width and other invisible characters, control characters, lone
// surrogates, right-to-left letters (one of them reorders the text after it), a Cyrillic
// letter inside a Latin word, a whole word of look-alike letters, and non-ASCII characters
// in an address or path are shown escaped as \uXXXX (JSON's notation, so the escaped JSON
// parses back to exactly the same data) and listed in a warning. JSON is read and written
// with its numbers exact (parseJson, stringifyJson). Defines the global `toolguardReveal`;
// its last part draws untrusted text as DOM text nodes, the page's one way to draw it.
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
    [0xfffc, 0xfffc, "OBJECT REPLACEMENT CHARACTER"],
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

  // Letters, marks and digits of right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, NKo,
  // Samaritan, Mandaic, their presentation forms, and the historic scripts of U+10800-U+10FFF
  // and U+1E800-U+1EFFF): one of them can reorder the text that follows it.
  const RTL = [
    [0x0590, 0x08ff],
    [0xfb1d, 0xfdff],
    [0xfe70, 0xfefe],
    [0x10800, 0x10fff],
    [0x1e800, 0x1efff],
  ];

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
  // In prose kept as it is (drawn in a box of its own), a right-to-left run also holds the
  // spaces, digits and punctuation between its letters.
  const RTL_JOINERS = new Set(Array.from(" \u00a00123456789.,:;!?'\"()-/%+*#&=_", (ch) => ch.codePointAt(0)));
  const RTL_KEPT = "right-to-left text, drawn in a box of its own: it cannot reorder the text around it";

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
    rtl: RTL,
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
  const isRtl = (cp) => lookup(RTL, cp) !== null;
  const isAsciiLetter = (cp) => (cp >= 0x41 && cp <= 0x5a) || (cp >= 0x61 && cp <= 0x7a);
  const isAsciiAlnum = (cp) => isAsciiLetter(cp) || (cp >= 0x30 && cp <= 0x39);
  const hex4 = (n) => n.toString(16).padStart(4, "0");
  const u = (cp) => `U+${hex4(cp).toUpperCase()}`;
  const cut = (text) => (text.length > KEY_LIMIT ? `${text.slice(0, KEY_LIMIT)}…` : text);

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

  // What a run of right-to-left characters is (each of its characters gets this text).
  function rtlWhat(first, last, count) {
    if (count === 1) return `right-to-left character ${u(first)}`;
    return `right-to-left text of ${count} characters (${u(first)} … ${u(last)})`;
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
    const n = cps.length;
    let i = 0;
    while (i < n) {
      if (flags.has(i) || !isRtl(cps[i])) {
        i += 1;
        continue;
      }
      let j = i;
      while (j < n && !flags.has(j) && isRtl(cps[j])) j += 1;
      const what = rtlWhat(cps[i], cps[j - 1], j - i);
      for (let k = i; k < j; k += 1) flags.set(k, what);
      i = j;
    }
    if (!letters) return flags;
    const scripts = cps.map(scriptOf);
    const hasLatin = scripts.includes("Latin");
    i = 0;
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
  // character is its own segment. Neighbouring plain text is merged. In prose whose
  // right-to-left text is kept (see textSegments), such a run is [text, what, "rtl"].
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

  // Prose keeping its right-to-left text readable: each run of right-to-left characters
  // (with the spaces, digits and punctuation between them) is one [text, RTL_KEPT, "rtl"]
  // segment, which the page draws in a box of its own; every other flagged character is
  // escaped as usual.
  function pushProse(out, cps, flags) {
    const rtl = (i) => flags.has(i) && flags.get(i).startsWith("right-to-left ");
    const n = cps.length;
    let start = 0;
    let i = 0;
    while (i < n) {
      if (!rtl(i)) {
        i += 1;
        continue;
      }
      let end = i + 1;
      for (let j = i + 1; j < n; j += 1) {
        if (rtl(j)) end = j + 1;
        else if (flags.has(j) || !RTL_JOINERS.has(cps[j])) break;
      }
      pushText(out, cps.slice(start, i), shifted(flags, start, i), false);
      out.push([String.fromCodePoint(...cps.slice(i, end)), RTL_KEPT, "rtl"]);
      start = end;
      i = end;
    }
    pushText(out, cps.slice(start), shifted(flags, start, n), false);
  }

  function shifted(flags, start, end) {
    const part = new Map();
    for (let k = start; k < end; k += 1) if (flags.has(k)) part.set(k - start, flags.get(k));
    return part;
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

  // rtl: "escape" (default) escapes right-to-left characters like the others; "keep"
  // keeps each run of them as one marked segment (prose: replies, results, reasons).
  function textSegments(text, { singleLine = false, letters = true, rtl = "escape" } = {}) {
    const cps = codePointsOf(text);
    const out = [];
    const flags = scanCodePoints(cps, singleLine, letters);
    if (rtl === "keep") pushProse(out, cps, flags);
    else pushText(out, cps, flags, false);
    return out;
  }

  function keyLabel(key) {
    if (key.length <= KEY_LIMIT && IDENTIFIER.test(key)) return `.${key}`;
    const cps = codePointsOf(key);
    const head = cps.slice(0, KEY_LIMIT);
    const out = [];
    pushText(out, head, scanCodePoints(head, true, true), true);
    const more = cps.length > KEY_LIMIT ? "…" : "";
    return `["${joined(out)}${more}"]`;
  }

  function whereOf(path) {
    const shown = path.length > PATH_LIMIT ? [...path.slice(0, 3), ".…", ...path.slice(-4)] : path;
    return `args${shown.join("")}`;
  }

  // ------------------------------------------------------------------ exact JSON numbers
  // JavaScript reads every JSON number as a 64-bit float: 9007199254740993 would become
  // 9007199254740992 and 10**400 Infinity (JSON.stringify writes it as null). parseJson
  // keeps every number whose text a float would not give back exactly as a JsonNumber
  // holding its text, which revealJson and stringifyJson write back as it was.

  class JsonNumber {
    constructor(source) {
      this.source = source;
      Object.freeze(this);
    }

    valueOf() {
      return Number(this.source);
    }

    toString() {
      return this.source;
    }

    // Inside JSON.stringify: the exact text where the browser can write it, else the float.
    toJSON() {
      return typeof JSON.rawJSON === "function" ? JSON.rawJSON(this.source) : Number(this.source);
    }
  }

  const NUMBER_TEXT = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

  // A number's text as {negative, digits, exponent}: the value is ±0.digits × 10^exponent,
  // with no leading or trailing zero in digits (zero: digits ""); null if not a number.
  function decimalOf(text) {
    const found = NUMBER_TEXT.exec(text);
    if (found === null) return null;
    const [, sign, whole, fraction = "", power = "0"] = found;
    const all = whole + fraction;
    const lead = all.length - all.replace(/^0+/, "").length;
    const digits = all.slice(lead).replace(/0+$/, "");
    if (digits === "") return { negative: false, digits: "", exponent: 0n };
    const exponent = BigInt(power) + BigInt(whole.length - lead);
    return { negative: sign === "-", digits, exponent };
  }

  // -1, 0 or 1: a < b, a = b, a > b (exact decimals, of any size).
  function compareDecimals(a, b) {
    const signOf = (x) => (x.digits === "" ? 0 : x.negative ? -1 : 1);
    const sa = signOf(a);
    const sb = signOf(b);
    if (sa !== sb) return sa < sb ? -1 : 1;
    if (sa === 0) return 0;
    let order = 0;
    if (a.exponent !== b.exponent) order = a.exponent < b.exponent ? -1 : 1;
    else {
      const width = Math.max(a.digits.length, b.digits.length);
      const da = a.digits.padEnd(width, "0");
      const db = b.digits.padEnd(width, "0");
      order = da === db ? 0 : da < db ? -1 : 1;
    }
    return sa * order;
  }

  const isNumber = (value) => typeof value === "number" || value instanceof JsonNumber;
  const numberText = (value) => (value instanceof JsonNumber ? value.source : String(value));
  const decimal = (value) => (isNumber(value) ? decimalOf(numberText(value)) : null);
  const integerText = (text) => !/[.eE]/.test(text);

  // Whether a number (a float or a JsonNumber) is an integer, exactly.
  function isInteger(value) {
    const found = decimal(value);
    return found !== null && (found.digits === "" || found.exponent >= BigInt(found.digits.length));
  }

  // Why a number cannot be shown as what a program reading it gets, or null. An integer
  // is read exactly (Python's int); any other number as a 64-bit float.
  function numberProblem(value) {
    if (typeof value === "number") {
      if (Number.isFinite(value)) return null;
      return `${nonFiniteText(value)} is not a JSON number`;
    }
    const text = value.source;
    const found = decimalOf(text);
    if (found === null || integerText(text)) return null;
    const read = Number(text);
    if (!Number.isFinite(read)) {
      return `number ${cut(text)} is beyond a 64-bit float (it reads as ${nonFiniteText(read)})`;
    }
    if (compareDecimals(found, decimalOf(String(read))) !== 0) {
      return `number ${cut(text)} is rounded when read as a 64-bit float (to ${String(read)})`;
    }
    return null;
  }

  const nonFiniteText = (value) => (Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity");

  function numberOf(text) {
    const read = Number(text);
    return JSON.stringify(read) === text ? read : new JsonNumber(text);
  }

  // Object keys in the order of the JSON text (JavaScript puts integer-like keys first).
  const KEYS = Symbol("toolguard.keys");

  function keysOf(object) {
    const own = Object.keys(object);
    const stored = Object.prototype.hasOwnProperty.call(object, KEYS) ? object[KEYS] : null;
    if (stored && stored.length === own.length && stored.every((key) => Object.hasOwn(object, key))) {
      return stored;
    }
    return own;
  }

  // JSON text as values, numbers exact (above) and object keys in their order. Text that is
  // not JSON throws the browser's own SyntaxError.
  function parseJson(text) {
    JSON.parse(text); // the platform says whether it is JSON, and why not
    const WHITE = new Set([0x20, 0x09, 0x0a, 0x0d]);
    const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
    let i = 0;
    const skip = () => {
      while (i < text.length && WHITE.has(text.charCodeAt(i))) i += 1;
    };
    const string = () => {
      const start = i;
      let plain = true;
      i += 1;
      for (;;) {
        const c = text.charCodeAt(i);
        if (c === 0x22) break;
        if (c === 0x5c) {
          plain = false;
          i += 2;
        } else i += 1;
      }
      i += 1;
      return plain ? text.slice(start + 1, i - 1) : JSON.parse(text.slice(start, i));
    };
    const scalar = () => {
      const c = text[i];
      if (c === '"') return string();
      if (c === "t") {
        i += 4;
        return true;
      }
      if (c === "f") {
        i += 5;
        return false;
      }
      if (c === "n") {
        i += 4;
        return null;
      }
      NUMBER.lastIndex = i;
      const found = NUMBER.exec(text)[0];
      i += found.length;
      return numberOf(found);
    };
    const key = (frame) => {
      skip();
      frame.key = string();
      skip();
      i += 1; // the colon
    };
    const finish = (frame) => {
      if (Array.isArray(frame.value)) return frame.value;
      Object.defineProperty(frame.value, KEYS, { value: frame.keys });
      return frame.value;
    };
    const put = (frame, value) => {
      if (Array.isArray(frame.value)) {
        frame.value.push(value);
        return;
      }
      if (!Object.hasOwn(frame.value, frame.key)) frame.keys.push(frame.key);
      Object.defineProperty(frame.value, frame.key, {
        value,
        writable: true,
        enumerable: true,
        configurable: true,
      });
    };
    const stack = [];
    for (;;) {
      skip();
      let value;
      const c = text[i];
      if (c === "{" || c === "[") {
        i += 1;
        skip();
        const frame = c === "{" ? { value: {}, keys: [], key: "" } : { value: [] };
        if (text[i] === "}" || text[i] === "]") {
          i += 1;
          value = finish(frame);
        } else {
          if (c === "{") key(frame);
          stack.push(frame);
          continue;
        }
      } else {
        value = scalar();
      }
      for (;;) {
        if (stack.length === 0) return value;
        const frame = stack[stack.length - 1];
        put(frame, value);
        skip();
        if (text[i] === ",") {
          i += 1;
          if (!Array.isArray(frame.value)) key(frame);
          break;
        }
        i += 1; // the closing bracket
        stack.pop();
        value = finish(frame);
      }
    }
  }

  function scalar(value) {
    if (value === null || value === undefined) return "null";
    if (typeof value === "boolean" || typeof value === "number") return JSON.stringify(value);
    if (typeof value === "bigint") return String(value);
    return JSON.stringify(String(value));
  }

  // Pretty JSON like JSON.stringify(value, null, indent), suspicious characters escaped,
  // numbers exact (a number no float reads as shown is marked), keys in their order.
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

    function number(item, where) {
      const problem = numberProblem(item);
      const text = typeof item === "number" && !Number.isFinite(item) ? nonFiniteText(item) : numberText(item);
      if (problem === null) {
        add(out, typeof item === "number" ? JSON.stringify(item) : text);
        return;
      }
      findings.push({ what: problem, where });
      out.push([text, problem]);
    }

    function open(item, depth, path) {
      if (typeof item === "string") {
        string(item, whereOf(path), false);
      } else if (isNumber(item)) {
        number(item, whereOf(path));
      } else if (Array.isArray(item)) {
        if (item.length === 0) add(out, "[]");
        else {
          add(out, "[");
          stack.push({ entries: item.map((v, i) => [i, v]), next: 0, depth: depth + 1, close: "]", path });
        }
      } else if (item !== null && typeof item === "object") {
        const entries = keysOf(item).map((key) => [key, item[key]]);
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

  // JSON text of a value read by parseJson (a request body): exact numbers, keys in their
  // order, invisible characters as \uXXXX escapes (the same data). Throws for a number
  // JSON cannot hold (NaN, an infinity).
  function stringifyJson(value) {
    const findings = [];
    const text = joined(jsonSegments(value, null, findings));
    const bad = findings.find(({ what }) => what.endsWith(" is not a JSON number"));
    if (bad) throw new RangeError(`${bad.what} (${bad.where})`);
    return text;
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

  // ------------------------------------------------------------------ drawing (the page)
  // The page's one way to draw untrusted text: text nodes only (never markup); an escaped
  // character in a <span class="reveal"> titled with what it is; kept right-to-left text in
  // a <bdi dir="rtl" class="reveal rtl"> of its own.

  function nodes(segments) {
    return segments.map(([text, what, kind]) => {
      if (what === null) return document.createTextNode(text);
      const node = document.createElement(kind === "rtl" ? "bdi" : "span");
      node.className = kind === "rtl" ? "reveal rtl" : "reveal";
      if (kind === "rtl") node.dir = "rtl";
      node.title = what;
      node.textContent = text;
      return node;
    });
  }

  // JSON (arguments, structured results) as the card shows arguments: numbers exact (a number
  // no float reads as shown is marked), suspicious characters escaped, keys in their order.
  const jsonNodes = (value, indent = 2) => nodes(jsonSegments(value, indent, []));

  // A name (tool, server, client, reviewer, a reason quoting one): one line, every
  // suspicious character escaped (right-to-left ones too), look-alikes found.
  const nameNodes = (text) => nodes(textSegments(String(text ?? ""), { singleLine: true }));

  // A name inside a sentence: in a left-to-right box of its own (<bdi dir="ltr">).
  function nameBox(text, attrs = {}) {
    const box = document.createElement("bdi");
    box.dir = "ltr";
    box.className = attrs.className ?? "name";
    if (attrs.testid) box.setAttribute("data-testid", attrs.testid);
    box.append(...nameNodes(text));
    return box;
  }

  // Prose (replies, results, errors, rationales): invisible characters escaped; right-to-left
  // text kept readable in boxes of its own.
  const proseNodes = (text, { singleLine = false } = {}) =>
    nodes(textSegments(String(text ?? ""), { singleLine, letters: false, rtl: "keep" }));

  // A name as plain text (for attributes such as aria-label): escaped, unmarked.
  const nameText = (text) => joined(textSegments(String(text ?? ""), { singleLine: true }));

  globalThis.toolguardReveal = Object.freeze({
    TABLES,
    JsonNumber,
    scan: (text, options) => Object.fromEntries(scan(text, options)),
    textSegments,
    revealJson,
    revealAction,
    warningLines,
    joined,
    parseJson,
    stringifyJson,
    keysOf,
    isNumber,
    isInteger,
    decimal,
    compareDecimals,
    numberProblem,
    nodes,
    jsonNodes,
    nameNodes,
    nameBox,
    nameText,
    proseNodes,
  });
})();
