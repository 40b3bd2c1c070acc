/* The fact scan's walk for one width of str: CHAR is Py_UCS1, Py_UCS2 or Py_UCS4, and F(name)
 * names this width's copy (_facts.c includes this file once for each). Each test below is one
 * that a kind of fact's pattern (fact_scan._URL, _PATH, _IDENT, _NUMBER_AT_WORD) cannot match
 * without, so a position none of them holds at is one no kind matches at. */

static int F(starts_with)(const CHAR *s, Py_ssize_t n, Py_ssize_t p, const char *w, Py_ssize_t len) {
    if (n - p < len)
        return 0;
    for (Py_ssize_t i = 0; i < len; i++)
        if ((Py_UCS4)s[p + i] != (Py_UCS4)(unsigned char)w[i])
            return 0;
    return 1;
}

/* "commit", "sha" or "hash" at p, then no word character: _IDENT's hash forms, and a word the
 * gates let through */
static int F(hash_name_at)(const CHAR *s, Py_ssize_t n, Py_ssize_t p) {
    const char *w;
    Py_ssize_t len;
    switch (s[p]) {
    case 'c':
        w = "commit", len = 6;
        break;
    case 's':
        w = "sha", len = 3;
        break;
    case 'h':
        w = "hash", len = 4;
        break;
    default:
        return 0;
    }
    return F(starts_with)(s, n, p, w, len) && (p + len == n || !is_word(s[p + len]));
}

/* a 7-12 letter a-f word at p, then no word character: a word the gates let through */
static int F(hex_letters_at)(const CHAR *s, Py_ssize_t n, Py_ssize_t p) {
    Py_ssize_t q = p;
    while (q < n && q - p <= 12 && s[q] >= 'a' && s[q] <= 'f')
        q++;
    return q - p >= 7 && q - p <= 12 && (q == n || !is_word(s[q]));
}

/* _IDENT's hex form: a 7-12 character hex word at p, with "commit", "sha" or "hash" starting
 * within 40 characters after it on its line */
static int F(hex_before_hash_name)(const CHAR *s, Py_ssize_t n, Py_ssize_t p) {
    Py_ssize_t e = p;
    while (e < n && e - p <= 12 && is_hex(s[e]))
        e++;
    if (e - p < 7 || e - p > 12 || (e < n && is_word(s[e])))
        return 0;
    for (Py_ssize_t k = e; k <= e + 40 && k < n && s[k] != '\n'; k++)
        if (F(hash_name_at)(s, n, k))
            return 1;
    return 0;
}

/* _PATH's first form, (?:~?/|\./)?(?:[\w.@+-]+/)+...: its first "/" that follows a segment
 * character, in the run of segment characters and "/" after p (a "~" is only ever at p). Found
 * at `to`, the answer holds for every position before it; not found, for every position before
 * the run's end. */
static int F(slash_ahead)(const CHAR *s, Py_ssize_t n, Py_ssize_t p, Memo *m) {
    if (!memo_holds(m, p)) {
        Py_ssize_t i = p + 1;
        int found = 0;
        for (; i < n; i++) {
            Py_UCS4 c = s[i];
            if (c == '/') {
                if (is_segment(s[i - 1])) {
                    found = 1;
                    break;
                }
            } else if (!is_segment(c)) {
                break;
            }
        }
        m->from = p, m->to = i, m->found = found;
    }
    return m->found;
}

/* _PATH's second form, [\w.-]*\w\.(?:EXTENSIONS)\b, and _URL's domain, (?:[a-z0-9-]+\.)+(?:TLDS)
 * (?::\d+)?\b: a "." after p followed by a word in dot_words (an extension or a top-level domain
 * is followed by no word character, so it is the whole word there), in the run of word
 * characters, "." and "-" from p; 1, 0, or -1 on an error. */
static int F(dot_ahead)(Scan *sc, const CHAR *s, Py_ssize_t n, Py_ssize_t p, Memo *m) {
    if (!memo_holds(m, p)) {
        Py_ssize_t i = p + 1;
        int found = 0;
        while (i < n) {
            Py_UCS4 c = s[i];
            if (c == '.') {
                Py_ssize_t e = i + 1;
                while (e < n && is_word(s[e]))
                    e++;
                int in = word_in(sc->dot_words, sc->text, i + 1, e);
                if (in < 0)
                    return -1;
                if (in) {
                    found = 1;
                    break;
                }
                i = e; /* the word is in the run and holds no "." */
                continue;
            }
            if (!is_word(c) && c != '-')
                break;
            i++;
        }
        m->from = p, m->to = i, m->found = found;
    }
    return m->found;
}

/* _NUMBER_AT_WORD's first form, \d[\d,]*(?:\.\d+)?\s?(?:UNITS)\b: its unit follows the whole run
 * of digits and commas and the whole fraction (anywhere before, a digit or a comma is next, and
 * neither \s nor a unit starts with one), after at most one space, and is the whole word there
 * (a unit is followed by no word character), or "%"; 1, 0, or -1 on an error. */
static int F(unit_ahead)(Scan *sc, const CHAR *s, Py_ssize_t n, Py_ssize_t p, Memo *m) {
    if (!memo_holds(m, p)) {
        Py_ssize_t i = p;
        while (i < n && (is_decimal(s[i]) || s[i] == ','))
            i++;
        m->from = p, m->to = i, m->found = 0;
    }
    Py_ssize_t q = m->to;
    if (q + 1 < n && s[q] == '.' && is_decimal(s[q + 1])) {
        q++;
        while (q < n && is_decimal(s[q]))
            q++;
    }
    for (int spaces = 0; spaces < 2 && q < n; spaces++, q++) {
        if (s[q] == '%')
            return 1;
        Py_ssize_t e = q;
        while (e < n && is_word(s[e]))
            e++;
        int in = word_in(sc->unit_words, sc->text, q, e);
        if (in != 0)
            return in;
        if (!is_space(s[q]))
            break;
    }
    return 0;
}

/* _IDENT's ABC12 (5-10 capitals and digits, a capital among them, then no word character) and
 * ABC-12 (a capital, 1-9 capitals and digits, "-", a digit) */
static int F(caps_ident_at)(const CHAR *s, Py_ssize_t n, Py_ssize_t p) {
    Py_ssize_t i = p;
    int capital = 0;
    while (i < n && i - p <= 10 && (is_upper(s[i]) || is_ascii_digit(s[i]))) {
        capital |= is_upper(s[i]);
        i++;
    }
    Py_ssize_t len = i - p;
    if (capital && len >= 5 && len <= 10 && (i == n || !is_word(s[i])))
        return 1;
    return is_upper(s[p]) && len >= 2 && len <= 10 && i + 1 < n && s[i] == '-' && is_decimal(s[i + 1]);
}

/* _IDENT's snake_case_12, [a-z]+_[a-z]+_?\d+ (each letter run is whole: a letter is neither "_"
 * nor a digit) */
static int F(snake_ident_at)(const CHAR *s, Py_ssize_t n, Py_ssize_t p) {
    Py_ssize_t i = p;
    while (i < n && is_lower(s[i]))
        i++;
    if (i == p || i >= n || s[i] != '_')
        return 0;
    Py_ssize_t j = i + 1;
    while (j < n && is_lower(s[j]))
        j++;
    if (j == i + 1)
        return 0;
    if (j < n && s[j] == '_')
        j++;
    return j < n && is_decimal(s[j]);
}

/* Whether a kind of fact but a currency amount may match at p, where the gates hold: 1, 0, or
 * -1 on an error. memos: slash_ahead's, dot_ahead's and unit_ahead's. */
static int F(may_match)(Scan *sc, const CHAR *s, Py_ssize_t n, Py_ssize_t p, Memo *memos) {
    Py_UCS4 c = s[p];
    int r;
    if (c == 'h' && (F(starts_with)(s, n, p, "http://", 7) || F(starts_with)(s, n, p, "https://", 8)))
        return 1; /* a URL */
    if (F(slash_ahead)(s, n, p, &memos[0]))
        return 1; /* a path's first "name/" */
    if ((is_word(c) || c == '.' || c == '-') && (r = F(dot_ahead)(sc, s, n, p, &memos[1])) != 0)
        return r; /* a path's extension, a domain's top level */
    if (is_decimal(c)) {
        if ((r = F(unit_ahead)(sc, s, n, p, &memos[2])) != 0)
            return r; /* a number's unit */
        if (p + 4 < n && s[p + 4] == '-' && is_decimal(s[p + 1]) && is_decimal(s[p + 2]) && is_decimal(s[p + 3]))
            return 1; /* a date */
    }
    if ((is_upper(c) || is_ascii_digit(c)) && F(caps_ident_at)(s, n, p))
        return 1;
    if (is_lower(c) && F(snake_ident_at)(s, n, p))
        return 1;
    return F(hash_name_at)(s, n, p) || (is_hex(c) && F(hex_before_hash_name)(s, n, p));
}

/* The walk: 1, or 0 on an error (set). */
static int F(walk)(Scan *sc, const CHAR *s, Py_ssize_t n) {
    Memo memos[3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    Py_ssize_t p = 0, end;
    int after_word = 0; /* whether a word character is before p */
    while (p < n) {
        Py_UCS4 c = s[p];
        if (c < 128 ? !(CLASS[c] & C_START) && c != '$' : !is_currency(c) && !Py_UNICODE_ISALNUM(c)) {
            after_word = 0;
            p++;
            continue;
        }
        if (is_currency(c)) {
            if ((end = try_at(sc->currency, sc->text, p, sc->out)) < 0)
                return 0;
            if (end > 0) {
                after_word = is_word(s[end - 1]);
                p = end;
            } else {
                after_word = 0;
                p++;
            }
            continue;
        }
        if (after_word) {
            /* no fact but a currency amount starts after a word character */
            if (is_word(c)) {
                while (p < n && is_word(s[p]))
                    p++;
            } else {
                after_word = 0;
                p++;
            }
            continue;
        }
        if (c < 128 && (CLASS[c] & C_LETTER)) {
            Py_ssize_t q = p + 1;
            while (q < n && s[q] < 128 && (CLASS[s[q]] & C_LETTER))
                q++;
            int plain = q == n || (!is_word(s[q]) && !(s[q] < 128 && (CLASS[s[q]] & C_NEXT)));
            if (plain && !F(hash_name_at)(s, n, p) && !F(hex_letters_at)(s, n, p)) {
                /* the gates' plain word: no position in it passes them */
                after_word = 1;
                p = q;
                continue;
            }
        }
        int may = F(may_match)(sc, s, n, p, memos);
        if (may < 0)
            return 0;
        if (may) {
            if ((end = try_at(sc->kinds, sc->text, p, sc->out)) < 0)
                return 0;
            if (end > 0) {
                after_word = is_word(s[end - 1]);
                p = end;
                continue;
            }
        }
        after_word = is_word(c);
        p++;
    }
    return 1;
}
