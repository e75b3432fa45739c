package render

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// appendOutputs appends the outputs of a program as `jq -r` prints them:
// each on a line of its own, a string as it is, anything else as JSON.
func appendOutputs(b []byte, outs []any) ([]byte, error) {
	for _, v := range outs {
		var err error
		if s, ok := v.(string); ok {
			b = append(b, s...)
		} else if b, err = appendJSON(b, v, 0); err != nil {
			return b, err
		}
		b = append(b, '\n')
	}
	return b, nil
}

// indent is the indentation of one level, jq's default.
const indent = "  "

// appendJSON appends v as the gojq command (cli/encoder.go) prints it by
// default, depth levels in: indented by two spaces, object keys sorted
// by their bytes, `"key": value`, empty arrays and objects as [] and {},
// strings escaped as encoding/json does but without its HTML escapes, NaN
// as null, infinities clamped to ±math.MaxFloat64. It takes the types a
// gojq program outputs (those of gojq.Marshal).
func appendJSON(b []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case float64:
		return appendFloat(b, v), nil
	case *big.Int:
		return v.Append(b, 10), nil
	case json.Number:
		return append(b, v...), nil
	case string:
		return jsondoc.AppendString(b, v), nil
	case []any:
		if len(v) == 0 {
			return append(b, "[]"...), nil
		}
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, depth+1)
			var err error
			if b, err = appendJSON(b, x, depth+1); err != nil {
				return b, err
			}
		}
		return append(newline(b, depth), ']'), nil
	case map[string]any:
		if len(v) == 0 {
			return append(b, "{}"...), nil
		}
		b = append(b, '{')
		for i, k := range slices.Sorted(maps.Keys(v)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = newline(b, depth+1)
			b = append(jsondoc.AppendString(b, k), ':', ' ')
			var err error
			if b, err = appendJSON(b, v[k], depth+1); err != nil {
				return b, err
			}
		}
		return append(newline(b, depth), '}'), nil
	}
	return b, fmt.Errorf("cannot print a value of type %T", v)
}

// newline appends a newline and the indentation of depth.
func newline(b []byte, depth int) []byte {
	b = append(b, '\n')
	for range depth {
		b = append(b, indent...)
	}
	return b
}

// appendFloat appends f as encoding/json does, with NaN as null and the
// infinities clamped (jq's way).
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) {
		return append(b, "null"...)
	}
	f = min(max(f, -math.MaxFloat64), math.MaxFloat64)
	format := byte('f')
	if x := math.Abs(f); x != 0 && (x < 1e-6 || x >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-07 is written e-7.
		if n := len(b); n-start >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
