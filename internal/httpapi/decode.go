package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"

	"github.com/gin-gonic/gin"
)

// bind decodes a JSON body of at most MaxBodyBytes into v, refusing unknown
// fields and trailing data. On failure it writes the problem.
func bind(c *gin.Context, v any) bool {
	body, ok := readBody(c)
	return ok && decode(c, body, v)
}

// readBody reads a body of at most MaxBodyBytes. On failure it writes the
// problem.
func readBody(c *gin.Context) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return body, true
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The server's read timeout passed before the body arrived: the
		// client is too slow, or holds the connection on purpose.
		problem(c, "request-timeout", "the body did not arrive within the server's read timeout")
	case errors.As(err, &tooBig):
		problem(c, "invalid-request", fmt.Sprintf("the body is larger than %d bytes", MaxBodyBytes))
	default:
		problem(c, "invalid-request", "reading the body: "+err.Error())
	}
	return nil, false
}

// decode decodes body, one JSON object, into v, refusing unknown fields and
// trailing data. On failure it writes the problem.
func decode(c *gin.Context, body []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, err = dec.Token(); err == io.EOF {
			return true
		}
		err = errors.New("unexpected data after the JSON object")
	}
	if errors.Is(err, io.EOF) {
		problem(c, "invalid-request", "the body is empty; a JSON object is required")
	} else {
		problem(c, "invalid-request", jsonDetail(err))
	}
	return false
}

// jsonDetail says what is wrong with a body that encoding/json refused, in
// the words of the API, never of Go: the field and what it must be.
func jsonDetail(err error) string {
	var typ *json.UnmarshalTypeError
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &typ) && typ.Field == "":
		return "the body must be a JSON object"
	case errors.As(err, &typ):
		return typ.Field + " must be " + kindName(typ.Type)
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the body ends before the JSON object does"
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown field " + field
	}
	return "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

// kindName names what a JSON value of Go type t must be.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// ValidID reports whether v, a SKU or a user, is 1 to MaxIDLength visible
// ASCII characters.
func ValidID(v string) bool {
	ok := v != "" && len(v) <= MaxIDLength
	for i := 0; ok && i < len(v); i++ {
		ok = v[i] > ' ' && v[i] < 0x7f
	}
	return ok
}

// validID answers 400 unless v is a valid ID.
func validID(c *gin.Context, field, v string) bool {
	ok := ValidID(v)
	if !ok {
		problem(c, "invalid-request", fmt.Sprintf("%s must be 1 to %d visible ASCII characters", field, MaxIDLength))
	}
	return ok
}

// optionalID is validID, but with optional an empty v is valid too.
func optionalID(c *gin.Context, field, v string, optional bool) bool {
	return (optional && v == "") || validID(c, field, v)
}
