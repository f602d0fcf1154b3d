package httpapi

import "github.com/gin-gonic/gin"

// An order of one SKU, as buyers send it, is read by hand: a compact
// object of "sku", "user_id" and "quantity", each at most once, whose
// strings hold printable ASCII with no escapes and whose quantity is a
// plain whole number. encoding/json reads such a body to the same values;
// any other body, a cart's, one with spaces, escapes or an error to
// explain, goes to encoding/json as before.

// bindOrder reads and decodes an order's body into b, as bind does.
func bindOrder(c *gin.Context, b *orderBody) bool {
	body, ok := readBody(c)
	if !ok {
		return false
	}
	if simpleOrder(body, b) {
		return true
	}
	*b = orderBody{}
	return decode(c, body, b)
}

// simpleOrder decodes body into b if it is the plain form above, and
// reports whether it was.
func simpleOrder(body []byte, b *orderBody) bool {
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return false
	}
	var seen [3]bool
	rest := body[1 : len(body)-1]
	for len(rest) > 0 {
		key, r, ok := plainString(rest)
		if !ok || len(r) == 0 || r[0] != ':' {
			return false
		}
		r = r[1:]
		var value []byte
		field := -1
		switch string(key) {
		case "sku":
			field = 0
			value, r, ok = plainString(r)
			b.SKU = string(value)
		case "user_id":
			field = 1
			value, r, ok = plainString(r)
			b.UserID = string(value)
		case "quantity":
			field = 2
			b.Quantity, r, ok = plainInt(r)
		}
		if field < 0 || !ok || seen[field] {
			return false
		}
		seen[field] = true
		if len(r) > 0 {
			if r[0] != ',' || len(r) == 1 {
				return false
			}
			r = r[1:]
		}
		rest = r
	}
	return true
}

// plainString reads a string of printable ASCII with no escapes from the
// start of p, and returns its bytes and what follows.
func plainString(p []byte) (s, rest []byte, ok bool) {
	if len(p) == 0 || p[0] != '"' {
		return nil, p, false
	}
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			return p[1:i], p[i+1:], true
		case c < ' ' || c > '~' || c == '\\':
			return nil, p, false
		}
	}
	return nil, p, false
}

// plainInt reads 0, or a whole number of 1 to 9 digits with no leading
// zero, from the start of p, and returns it and what follows.
func plainInt(p []byte) (n int, rest []byte, ok bool) {
	i := 0
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if i == 0 || i > 9 || i > 1 && p[0] == '0' {
		return 0, p, false
	}
	for _, c := range p[:i] {
		n = n*10 + int(c-'0')
	}
	return n, p[i:], true
}
