package loadtest

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"sync"

	"github.com/stockguard/shop/internal/jsonenc"
)

// An order's body is built by hand, as encoding/json would write the
// order type: the load generator spends its CPU beside the shops', on the
// same cores, so what it spends per request is taken from them.

// appendOrderBody appends o's JSON, the bytes json.Marshal(o) gives.
func appendOrderBody(b []byte, o order) []byte {
	b = jsonenc.AppendString(append(b, `{"user_id":`...), o.UserID)
	if o.SKU != "" {
		b = jsonenc.AppendString(append(b, `,"sku":`...), o.SKU)
	}
	if o.Quantity != 0 {
		b = strconv.AppendInt(append(b, `,"quantity":`...), int64(o.Quantity), 10)
	}
	if len(o.Items) > 0 {
		b = append(b, `,"items":[`...)
		for i, l := range o.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(append(b, `{"sku":`...), l.SKU)
			b = strconv.AppendInt(append(b, `,"quantity":`...), int64(l.Quantity), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// createdID reads the id of a 201's answer, when the answer is valid JSON
// that begins with it, {"id":N, as the shop writes it, and names no other
// id; else it reports false, for encoding/json to read the answer.
func createdID(data []byte) (int64, bool) {
	rest, ok := bytes.CutPrefix(data, []byte(`{"id":`))
	i := 0
	for ok && i < len(rest) && i < 18 && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if !ok || i == 0 || i == len(rest) || rest[i] != ',' && rest[i] != '}' || i > 1 && rest[0] == '0' ||
		bytes.Contains(rest[i:], []byte(`"id"`)) || !json.Valid(data) {
		return 0, false
	}
	var id int64
	for _, c := range rest[:i] {
		id = id*10 + int64(c-'0')
	}
	return id, true
}

// answers are the buffers answers are read into.
var answers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readAnswer reads up to 64 KiB of r into a buffer of the pool, to be put
// back with answers.Put when its bytes are no longer needed.
func readAnswer(r io.Reader) (*bytes.Buffer, error) {
	buf := answers.Get().(*bytes.Buffer)
	buf.Reset()
	_, err := buf.ReadFrom(io.LimitReader(r, 64<<10))
	return buf, err
}
