//go:build linux

// Part of execfast.c, included there after execfast_text.h: the status
// frame's JSON, read as encoding/json reads it.

#ifndef STATICPODD_EXECFAST_JSON_H
#define STATICPODD_EXECFAST_JSON_H

// The status frame's JSON, server.ExecStatus: {"exitCode":N,"error":"..."},
// as encoding/json reads it (keys matched without regard to case, the last
// of a key winning, invalid UTF-8 in a string read as U+FFFD, other fields
// skipped, 10000 levels at the most). What it does not take is a daemon this
// CLI does not understand: it says so, in its own words.
struct json {
	const unsigned char *p, *end;
};

static void json_ws(struct json *j) {
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int hex4(const unsigned char *p, uint32_t *v) {
	*v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned char c = p[i];
		*v <<= 4;
		if (c >= '0' && c <= '9')
			*v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			*v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			*v |= c - 'A' + 10;
		else
			return 0;
	}
	return 1;
}

static int json_string(struct json *j, struct buf *out) {
	if (j->p >= j->end || *j->p != '"')
		return 0;
	j->p++;
	while (j->p < j->end) {
		unsigned char c = *j->p;
		if (c == '"') {
			j->p++;
			if (!out->p)
				put(out, "", 0);
			return 1;
		}
		if (c < 0x20)
			return 0;
		if (c != '\\') {
			size_t w;
			uint32_t r = decode_rune(j->p, (size_t)(j->end - j->p), &w);
			if (r == 0xFFFD && w == 1)
				put_rune(out, r);
			else
				put(out, j->p, w);
			j->p += w;
			continue;
		}
		if (j->end - j->p < 2)
			return 0;
		c = j->p[1];
		j->p += 2;
		switch (c) {
		case '"': case '\\': case '/': put(out, &c, 1); break;
		case 'b': put(out, "\b", 1); break;
		case 'f': put(out, "\f", 1); break;
		case 'n': put(out, "\n", 1); break;
		case 'r': put(out, "\r", 1); break;
		case 't': put(out, "\t", 1); break;
		case 'u': {
			uint32_t r, r2;
			if (j->end - j->p < 4 || !hex4(j->p, &r))
				return 0;
			j->p += 4;
			if (r >= 0xD800 && r < 0xDC00) {
				if (j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' && hex4(j->p + 2, &r2) &&
				    r2 >= 0xDC00 && r2 < 0xE000) {
					j->p += 6;
					r = 0x10000 + ((r - 0xD800) << 10) + (r2 - 0xDC00);
				} else {
					r = 0xFFFD;
				}
			} else if (r >= 0xDC00 && r < 0xE000) {
				r = 0xFFFD;
			}
			put_rune(out, r);
			break;
		}
		default:
			return 0;
		}
	}
	return 0;
}

static int json_skip_literal(struct json *j) {
	static const char *lits[] = {"true", "false", "null"};
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(lits[i]);
		if ((size_t)(j->end - j->p) >= n && memcmp(j->p, lits[i], n) == 0) {
			j->p += n;
			return 1;
		}
	}
	return 0;
}

// json_number reads a JSON number; *isint says whether it is an integer
// that fits in an int64, *v its value then.
static int json_number(struct json *j, long long *v, int *isint) {
	int neg = 0;
	unsigned long long u = 0;
	*isint = 1;
	if (j->p < j->end && *j->p == '-') {
		neg = 1;
		j->p++;
	}
	if (j->p >= j->end || *j->p < '0' || *j->p > '9')
		return 0;
	if (*j->p == '0') {
		j->p++;
	} else {
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
			unsigned d = *j->p - '0';
			if (u > (ULLONG_MAX - d) / 10)
				*isint = 0;
			else
				u = u * 10 + d;
			j->p++;
		}
	}
	if (j->p < j->end && *j->p == '.') {
		*isint = 0;
		j->p++;
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return 0;
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		*isint = 0;
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (j->p >= j->end || *j->p < '0' || *j->p > '9')
			return 0;
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (*isint && (neg ? u > (unsigned long long)LLONG_MAX + 1 : u > (unsigned long long)LLONG_MAX))
		*isint = 0;
	if (*isint)
		*v = neg ? (long long)(0 - u) : (long long)u;
	return 1;
}

static int json_scalar(struct json *j) {
	unsigned char c = *j->p;
	if (c == '"') {
		struct buf s = {0};
		int ok = json_string(j, &s);
		free(s.p);
		return ok;
	}
	if (c == '-' || (c >= '0' && c <= '9')) {
		long long v;
		int isint;
		return json_number(j, &v, &isint);
	}
	return json_skip_literal(j);
}

static int json_key(struct json *j) {
	struct buf key = {0};
	json_ws(j);
	int ok = json_string(j, &key);
	free(key.p);
	json_ws(j);
	return ok && j->p < j->end && *j->p++ == ':';
}

// json_skip skips one value, checking its syntax, without recursion; depth
// is how many objects and arrays are open around it: encoding/json takes
// 10000 at the most.
#define JSON_MAX_DEPTH 10000
static int json_skip(struct json *j, int depth) {
	static unsigned char open[JSON_MAX_DEPTH + 1]; // each open one's closing character
	int top = 0;
	for (;;) {
		json_ws(j);
		if (j->p >= j->end)
			return 0;
		unsigned char c = *j->p;
		if (c == '{' || c == '[') {
			if (depth + top + 1 > JSON_MAX_DEPTH)
				return 0;
			j->p++;
			open[top++] = c == '{' ? '}' : ']';
			json_ws(j);
			if (j->p < j->end && *j->p == open[top - 1]) {
				j->p++;
				top--;
			} else {
				if (c == '{' && !json_key(j))
					return 0;
				continue; // its first value
			}
		} else if (!json_scalar(j)) {
			return 0;
		}
		// After a value: the next of the innermost open one, or its end.
		for (;;) {
			if (top == 0)
				return 1;
			json_ws(j);
			if (j->p < j->end && *j->p == ',') {
				j->p++;
				if (open[top - 1] == '}' && !json_key(j))
					return 0;
				break;
			}
			if (j->p < j->end && *j->p == open[top - 1]) {
				j->p++;
				top--;
				continue;
			}
			return 0;
		}
	}
}

static int key_is(const struct buf *key, const char *name) {
	return key->len == strlen(name) && strncasecmp(key->p, name, key->len) == 0;
}

static int parse_status(const char *p, size_t n, long long *code, struct buf *msg) {
	struct json j = {(const unsigned char *)p, (const unsigned char *)p + n};
	json_ws(&j);
	if (j.end - j.p >= 4 && memcmp(j.p, "null", 4) == 0) { // a zero status, as Unmarshal leaves it
		j.p += 4;
		json_ws(&j);
		return j.p == j.end;
	}
	if (j.p >= j.end || *j.p++ != '{')
		return 0;
	json_ws(&j);
	if (j.p < j.end && *j.p == '}') {
		j.p++;
		goto end;
	}
	for (;;) {
		struct buf key = {0};
		json_ws(&j);
		if (!json_string(&j, &key))
			return 0;
		json_ws(&j);
		if (j.p >= j.end || *j.p++ != ':')
			return 0;
		json_ws(&j);
		if (j.p >= j.end)
			return 0;
		int is_code = key_is(&key, "exitCode"), is_error = key_is(&key, "error");
		free(key.p);
		if (*j.p == '"') {
			struct buf s = {0};
			if (!json_string(&j, &s) || is_code)
				return 0;
			if (is_error) {
				free(msg->p);
				*msg = s;
			} else {
				free(s.p);
			}
		} else if (*j.p == '-' || (*j.p >= '0' && *j.p <= '9')) {
			long long v;
			int isint;
			if (!json_number(&j, &v, &isint) || is_error || (is_code && !isint))
				return 0;
			if (is_code)
				*code = v;
		} else if (*j.p == 'n' && json_skip_literal(&j)) {
			// null leaves a field as it is
		} else if (is_code || is_error || !json_skip(&j, 1)) {
			return 0;
		}
		json_ws(&j);
		if (j.p < j.end && *j.p == ',') {
			j.p++;
			continue;
		}
		if (j.p < j.end && *j.p == '}') {
			j.p++;
			break;
		}
		return 0;
	}
end:
	json_ws(&j);
	return j.p == j.end;
}

#endif // STATICPODD_EXECFAST_JSON_H
