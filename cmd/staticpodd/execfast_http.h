//go:build linux

// Part of execfast.c, included there after execfast_text.h, with fail
// declared: the daemon's answer read as net/http's ReadResponse and
// net/textproto read it (its status line, header lines, Transfer-Encoding,
// Content-Length and Trailer), each fault said in their words.

#ifndef STATICPODD_EXECFAST_HTTP_H
#define STATICPODD_EXECFAST_HTTP_H

// answer_malformed ends the exec over a 101 whose header http.ReadResponse
// would not take, with its message.
static void answer_malformed(const char *what, const char *line, size_t n) __attribute__((noreturn));
static void answer_malformed(const char *what, const char *line, size_t n) {
	struct buf b = {0};
	puts_(&b, "read exec answer: ");
	puts_(&b, what);
	go_quote(&b, line, n);
	fail(b.p, 1);
}

// header_end is the offset just past the empty line that ends the answer's
// header in p, 0 while it has not come. Lines end with \n, a \r before it
// dropped, as textproto reads them.
static size_t header_end(const char *p, size_t n) {
	for (size_t i = 0; i < n;) {
		const char *nl = memchr(p + i, '\n', n - i);
		if (!nl)
			return 0;
		size_t len = (size_t)(nl - (p + i));
		if (len == 0 || (len == 1 && p[i] == '\r'))
			return (size_t)(nl - p) + 1;
		i = (size_t)(nl - p) + 1;
	}
	return 0;
}

static void answer_error(struct buf *b) __attribute__((noreturn));

// status_code is the answer's status code as http.ReadResponse reads its
// first line (p[0:n], up to \n or, at the connection's end, all of it):
// "HTTP/d.d", a space, spaces, a code of three characters, then a space or
// the end. A line it would not take ends the exec with its message.
static int status_code(const char *p, size_t n) {
	const char *nl = memchr(p, '\n', n);
	size_t len = nl ? (size_t)(nl - p) : n;
	if (nl && len > 0 && p[len - 1] == '\r') // bufio's ReadLine drops a \r before a \n only
		len--;
	struct buf m = {0};
	const char *sp = memchr(p, ' ', len), *e = p + len;
	if (!sp) {
		puts_(&m, "malformed HTTP response ");
		go_quote(&m, p, len);
		answer_error(&m);
	}
	const char *c = sp;
	while (c < e && *c == ' ')
		c++;
	const char *ce = memchr(c, ' ', (size_t)(e - c));
	size_t clen = ce ? (size_t)(ce - c) : (size_t)(e - c);
	// strconv.Atoi of three characters, not negative.
	int code = 0, ok = clen == 3, neg = 0;
	for (size_t k = 0; k < clen && ok; k++) {
		if (k == 0 && (c[k] == '+' || c[k] == '-')) {
			neg = c[k] == '-';
			continue;
		}
		ok = c[k] >= '0' && c[k] <= '9';
		code = code * 10 + (c[k] - '0');
	}
	if (!ok || (neg && code != 0)) {
		puts_(&m, "malformed HTTP status code ");
		go_quote(&m, c, clen);
		answer_error(&m);
	}
	// http.ParseHTTPVersion.
	if (sp - p != 8 || memcmp(p, "HTTP/", 5) != 0 || p[5] < '0' || p[5] > '9' || p[6] != '.' || p[7] < '0' || p[7] > '9') {
		puts_(&m, "malformed HTTP version ");
		go_quote(&m, p, (size_t)(sp - p));
		answer_error(&m);
	}
	return code;
}

static int header_field_byte(unsigned char c) {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

// header_line is one line of the header at p[*i:n], without its \n and the
// \r before it; *i moves past it. A last line without \n (all that came
// before the connection's end or the deadline) is a line as it is, as
// bufio's ReadLine returns it.
static const char *header_line(const char *p, size_t n, size_t *i, size_t *len) {
	const char *line = p + *i, *nl = memchr(line, '\n', n - *i);
	if (!nl) {
		*len = n - *i;
		*i = n;
		return line;
	}
	*len = (size_t)(nl - line);
	*i += *len + 1;
	if (*len > 0 && line[*len - 1] == '\r')
		(*len)--;
	return line;
}

// vals are the values of one header key, in order.
struct vals {
	struct buf *v;
	int n;
};

static void trim_sp(const char **p, size_t *n) {
	while (*n > 0 && (**p == ' ' || **p == '\t')) {
		(*p)++;
		(*n)--;
	}
	while (*n > 0 && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
		(*n)--;
}

// read_header checks the header lines of an answer (p[0:n], the status
// line first, up to the empty line that ends the header or to all that
// came) as textproto.ReadMIMEHeader does, continuation lines folded, and
// adds the values of the header key (a header's key as http.Header matches
// it) to vals. A malformed header ends the exec with textproto's message.
static void read_header(const char *p, size_t n, const char *key, struct vals *vals) {
	size_t i = 0, len;
	header_line(p, n, &i, &len); // the status line
	for (int first = 1; i < n; first = 0) {
		const char *line = header_line(p, n, &i, &len);
		if (first && len > 0 && (line[0] == ' ' || line[0] == '\t')) {
			if (len > 80)
				fail("read exec answer: message too large", 1);
			answer_malformed("malformed MIME header initial line: ", line, len);
		}
		if (len == 0)
			return;
		if (!memchr(line, ':', len))
			answer_malformed("malformed MIME header: missing colon: ", line, len);
		// The line and its continuations, each trimmed, joined by a space.
		struct buf kv = {0};
		const char *t = line;
		size_t tl = len;
		trim_sp(&t, &tl);
		put(&kv, t, tl);
		while (i < n && (p[i] == ' ' || p[i] == '\t')) {
			while (i < n && (p[i] == ' ' || p[i] == '\t'))
				i++;
			const char *c = header_line(p, n, &i, &tl);
			trim_sp(&c, &tl);
			puts_(&kv, " ");
			put(&kv, c, tl);
		}
		const char *colon = memchr(kv.p, ':', kv.len);
		size_t klen = (size_t)(colon - kv.p);
		int ok = klen > 0;
		for (size_t k = 0; k < klen && ok; k++)
			ok = header_field_byte((unsigned char)kv.p[k]) || kv.p[k] == ' ';
		for (const char *c = colon + 1; c < kv.p + kv.len && ok; c++)
			ok = !(((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7F);
		if (!ok)
			answer_malformed("malformed MIME header line: ", kv.p, kv.len);
		if (klen == strlen(key) && strncasecmp(kv.p, key, klen) == 0) {
			const char *v = colon + 1;
			while (v < kv.p + kv.len && (*v == ' ' || *v == '\t'))
				v++;
			struct buf *grown = realloc(vals->v, (size_t)(vals->n + 1) * sizeof *grown);
			if (!grown)
				abort();
			vals->v = grown;
			vals->v[vals->n] = (struct buf){0};
			put(&vals->v[vals->n++], v, (size_t)(kv.p + kv.len - v));
		}
		free(kv.p);
	}
}

// quote_list appends vals as fmt's %q writes a []string.
static void quote_list(struct buf *b, const struct vals *vals) {
	puts_(b, "[");
	for (int k = 0; k < vals->n; k++) {
		if (k > 0)
			puts_(b, " ");
		go_quote(b, vals->v[k].p, vals->v[k].len);
	}
	puts_(b, "]");
}

static void answer_error(struct buf *b) {
	struct buf m = {0};
	puts_(&m, "read exec answer: ");
	put(&m, b->p, b->len);
	fail(m.p, 1);
}

static int equal_fold(const char *p, size_t n, const char *name) {
	return n == strlen(name) && strncasecmp(p, name, n) == 0;
}

#define BODY_CHUNKED (-1)
#define BODY_TO_THE_END (-2)

// body_length checks an answer's Transfer-Encoding, Content-Length and
// Trailer as http.ReadResponse does (readTransfer: parseTransferEncoding,
// fixLength, fixTrailer), ending the exec with its message where it would
// fail, and returns the body's length, BODY_CHUNKED or BODY_TO_THE_END.
static long long body_length(const char *p, int code, size_t hdr) {
	struct vals te = {0}, cl = {0}, tr = {0};
	struct buf m = {0};
	int chunked = 0;
	read_header(p, hdr, "Transfer-Encoding", &te);
	read_header(p, hdr, "Content-Length", &cl);
	read_header(p, hdr, "Trailer", &tr);
	// status_code checked "HTTP/d.d"; HTTP/0.0 is taken as 1.1.
	int http11 = (p[5] == '0' && p[7] == '0') || p[5] > '1' || (p[5] == '1' && p[7] >= '1');
	if (te.n > 0 && http11) {
		if (te.n != 1) {
			puts_(&m, "too many transfer encodings: ");
			quote_list(&m, &te);
			answer_error(&m);
		}
		if (!equal_fold(te.v[0].p, te.v[0].len, "chunked")) {
			puts_(&m, "unsupported transfer encoding: ");
			go_quote(&m, te.v[0].p, te.v[0].len);
			answer_error(&m);
		}
		chunked = 1;
	}
	for (int k = 1; k < cl.n; k++) {
		if (cl.v[k].len != cl.v[0].len || memcmp(cl.v[k].p, cl.v[0].p, cl.v[0].len) != 0) {
			puts_(&m, "http: message cannot contain multiple Content-Length headers; got ");
			quote_list(&m, &cl);
			answer_error(&m);
		}
	}
	unsigned long long length = 0;
	if (cl.n > 0) {
		// strconv.ParseUint(cl, 10, 63) of the value (trimmed already).
		const struct buf *v = &cl.v[0];
		int ok = v->len > 0;
		for (size_t k = 0; k < v->len && ok; k++) {
			unsigned d = (unsigned)(v->p[k] - '0');
			ok = d <= 9 && length <= (((unsigned long long)LLONG_MAX) - d) / 10;
			length = length * 10 + d;
		}
		if (!ok) {
			puts_(&m, v->len == 0 ? "invalid empty Content-Length " : "bad Content-Length ");
			go_quote(&m, v->p, v->len);
			answer_error(&m);
		}
	}
	// fixTrailer: a chunked answer's Trailer names no framing header.
	for (int k = 0; chunked && k < tr.n; k++) {
		const char *e = tr.v[k].p, *end = tr.v[k].p + tr.v[k].len;
		while (e < end) {
			const char *c = memchr(e, ',', (size_t)(end - e));
			const char *f = e, *fe = c ? c : end;
			size_t fl = (size_t)(fe - f);
			trim_sp(&f, &fl);
			static const char *bad[] = {"Transfer-Encoding", "Trailer", "Content-Length"};
			for (int b = 0; b < 3; b++) {
				if (equal_fold(f, fl, bad[b])) {
					puts_(&m, "bad trailer key ");
					go_quote(&m, bad[b], strlen(bad[b]));
					answer_error(&m);
				}
			}
			e = c ? c + 1 : end;
		}
	}
	for (int k = 0; k < te.n; k++)
		free(te.v[k].p);
	for (int k = 0; k < cl.n; k++)
		free(cl.v[k].p);
	for (int k = 0; k < tr.n; k++)
		free(tr.v[k].p);
	free(te.v);
	free(cl.v);
	free(tr.v);
	if (code / 100 == 1 || code == 204 || code == 304)
		return 0;
	if (chunked)
		return BODY_CHUNKED;
	return cl.n > 0 ? (long long)length : BODY_TO_THE_END;
}

#endif // STATICPODD_EXECFAST_HTTP_H
