//go:build linux

// Part of execfast.c, included there (one translation unit, every function
// static): its strings, and Go's ways of writing them (UTF-8 as Go decodes
// it, describe.EscapeBut, strconv.Quote, url.QueryEscape, strings.TrimSpace).

#ifndef STATICPODD_EXECFAST_TEXT_H
#define STATICPODD_EXECFAST_TEXT_H

// A growing byte string; an allocation failure ends the process as Go's
// would.
struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *p, size_t n) {
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (b->len + n + 1 > cap)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			abort();
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

// decode_rune is Go's utf8.DecodeRune: the rune at p and its width, an
// invalid sequence being U+FFFD of width 1.
static uint32_t decode_rune(const unsigned char *p, size_t n, size_t *width) {
	*width = 1;
	if (n == 0)
		return 0xFFFD;
	unsigned char c = p[0];
	if (c < 0x80)
		return c;
	uint32_t r;
	size_t need;
	unsigned char lo = 0x80, hi = 0xBF;
	if (c >= 0xC2 && c <= 0xDF) {
		need = 1;
		r = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		need = 2;
		r = c & 0x0F;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F; // no surrogates
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 3;
		r = c & 0x07;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else {
		return 0xFFFD;
	}
	if (n < need + 1)
		return 0xFFFD;
	for (size_t i = 1; i <= need; i++) {
		unsigned char cc = p[i];
		if (cc < (i == 1 ? lo : 0x80) || cc > (i == 1 ? hi : 0xBF))
			return 0xFFFD;
		r = r << 6 | (cc & 0x3F);
	}
	*width = need + 1;
	return r;
}

static void put_rune(struct buf *b, uint32_t r) {
	char s[4];
	if (r < 0x80) {
		s[0] = (char)r;
		put(b, s, 1);
	} else if (r < 0x800) {
		s[0] = (char)(0xC0 | r >> 6);
		s[1] = (char)(0x80 | (r & 0x3F));
		put(b, s, 2);
	} else if (r < 0x10000) {
		s[0] = (char)(0xE0 | r >> 12);
		s[1] = (char)(0x80 | (r >> 6 & 0x3F));
		s[2] = (char)(0x80 | (r & 0x3F));
		put(b, s, 3);
	} else {
		s[0] = (char)(0xF0 | r >> 18);
		s[1] = (char)(0x80 | (r >> 12 & 0x3F));
		s[2] = (char)(0x80 | (r >> 6 & 0x3F));
		s[3] = (char)(0x80 | (r & 0x3F));
		put(b, s, 4);
	}
}

// is_control is unicode.IsControl: C0, DEL and C1.
static int is_control(uint32_t r) { return r < 0x20 || (r >= 0x7F && r <= 0x9F); }

// escape_but is describe.EscapeBut: each control character not in keep
// written as an escape; a string with none is left as it is, and one with
// some has its invalid UTF-8 written as U+FFFD, as Go's range does.
static void escape_but(struct buf *out, const char *s, size_t n, const char *keep) {
	const unsigned char *u = (const unsigned char *)s;
	int any = 0;
	for (size_t i = 0, w; i < n; i += w) {
		uint32_t r = decode_rune(u + i, n - i, &w);
		if (is_control(r) && !(r < 0x80 && r != 0 && strchr(keep, (int)r))) {
			any = 1;
			break;
		}
	}
	if (!any) {
		put(out, s, n);
		return;
	}
	for (size_t i = 0, w; i < n; i += w) {
		uint32_t r = decode_rune(u + i, n - i, &w);
		char e[8];
		if (!is_control(r) || (r < 0x80 && r != 0 && strchr(keep, (int)r))) {
			put_rune(out, r);
			continue;
		}
		static const char hex[] = "0123456789abcdef";
		if (r < 0x80) {
			memcpy(e, "\\x", 2);
			e[2] = hex[r >> 4];
			e[3] = hex[r & 0xF];
			put(out, e, 4);
		} else {
			memcpy(e, "\\u00", 4);
			e[4] = hex[r >> 4];
			e[5] = hex[r & 0xF];
			put(out, e, 6);
		}
	}
}

// query_escape is url.QueryEscape.
static void query_escape(struct buf *b, const char *s) {
	static const char hex[] = "0123456789ABCDEF";
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		unsigned char c = *p;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
		    c == '.' || c == '~') {
			put(b, p, 1);
		} else if (c == ' ') {
			puts_(b, "+");
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 0xF]};
			put(b, e, 3);
		}
	}
}

static void query_add(struct buf *b, const char *key, const char *value) {
	if (b->len > 0 && b->p[b->len - 1] != '?')
		puts_(b, "&");
	puts_(b, key);
	puts_(b, "=");
	query_escape(b, value);
}

// go_quote appends p quoted as strconv.Quote does for ASCII (a byte that
// is not UTF-8 as \xNN, a control as its escape). Every other character it
// writes as an escape too (strconv keeps those unicode.IsPrint allows): the
// line comes from a daemon that sent a malformed header, and a character
// such as U+202E must not reach the terminal as it is.
static void go_quote(struct buf *b, const char *p, size_t n) {
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)p;
	puts_(b, "\"");
	for (size_t i = 0, w; i < n; i += w) {
		uint32_t r = decode_rune(u + i, n - i, &w);
		char e[12] = {'\\'};
		if (r == 0xFFFD && w == 1) {
			e[1] = 'x';
			e[2] = hex[u[i] >> 4];
			e[3] = hex[u[i] & 0xF];
			put(b, e, 4);
		} else if (r == '"' || r == '\\') {
			e[1] = (char)r;
			put(b, e, 2);
		} else if (r >= 0x20 && r < 0x7F) {
			put(b, u + i, w);
		} else if (r >= '\a' && r <= '\r') {
			e[1] = "abtnvfr"[r - '\a'];
			put(b, e, 2);
		} else if (r < 0x80) {
			e[1] = 'x';
			e[2] = hex[r >> 4];
			e[3] = hex[r & 0xF];
			put(b, e, 4);
		} else {
			int digits = r < 0x10000 ? 4 : 8;
			e[1] = digits == 4 ? 'u' : 'U';
			for (int k = 0; k < digits; k++)
				e[2 + k] = hex[(r >> (4 * (digits - 1 - k))) & 0xF];
			put(b, e, (size_t)(2 + digits));
		}
	}
	puts_(b, "\"");
}


// unicode_space is unicode.IsSpace for the rune r.
static int unicode_space(uint32_t r) {
	return (r >= '\t' && r <= '\r') || r == ' ' || r == 0x85 || r == 0xA0 || r == 0x1680 || (r >= 0x2000 && r <= 0x200A) ||
	       r == 0x2028 || r == 0x2029 || r == 0x202F || r == 0x205F || r == 0x3000;
}

// trim_space is strings.TrimSpace.
static void trim_space(const char **p, size_t *n) {
	const unsigned char *u = (const unsigned char *)*p;
	size_t w, start = 0, end = *n;
	while (start < end && unicode_space(decode_rune(u + start, end - start, &w)))
		start += w;
	while (end > start) {
		size_t k = end - 1; // the last rune's start
		while (k > start && end - k < 4 && (u[k] & 0xC0) == 0x80)
			k--;
		uint32_t r = decode_rune(u + k, end - k, &w);
		if (k + w != end) { // not one rune: its last byte is one of its own
			k = end - 1;
			r = decode_rune(u + k, 1, &w);
		}
		if (!unicode_space(r))
			break;
		end = k;
	}
	*p += start;
	*n = end - start;
}

#endif // STATICPODD_EXECFAST_TEXT_H
