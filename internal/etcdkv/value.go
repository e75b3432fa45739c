package etcdkv

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// ValueMode says how a value's bytes become JSON (nodewatch --value).
type ValueMode int

const (
	// ValueAuto: JSON if the bytes parse as JSON, else a string if they
	// are valid UTF-8, else {"base64": "..."}. Nothing is ever lost.
	ValueAuto ValueMode = iota
	// ValueJSON: the bytes must be JSON; other values are skipped.
	ValueJSON
	// ValueText: the bytes must be UTF-8 and become a string; other values
	// are skipped.
	ValueText
	// ValueBase64: the bytes become a base64 string (as etcdctl -w json).
	ValueBase64
)

// ParseValueMode parses the value of --value.
func ParseValueMode(s string) (ValueMode, error) {
	switch s {
	case "auto", "":
		return ValueAuto, nil
	case "json":
		return ValueJSON, nil
	case "text":
		return ValueText, nil
	case "base64":
		return ValueBase64, nil
	}
	return 0, fmt.Errorf("unknown value mode %q (want auto, json, text or base64)", s)
}

// Object returns the object nodewatch prints for kv:
// {key, value, create_revision, mod_revision, version, lease}. Keys that are
// not valid UTF-8 come out as {"base64": "..."}, as values do under auto.
// Numbers in JSON values are kept as json.Number, so none loses precision.
func Object(kv *mvccpb.KeyValue, mode ValueMode) (map[string]any, error) {
	v, err := decodeValue(kv.Value, mode)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"key":             Bytes(kv.Key),
		"value":           v,
		"create_revision": int(kv.CreateRevision),
		"mod_revision":    int(kv.ModRevision),
		"version":         int(kv.Version),
		"lease":           int(kv.Lease),
	}, nil
}

// Bytes returns b as a string if it is valid UTF-8, else as
// {"base64": "..."}.
func Bytes(b []byte) any {
	if utf8.Valid(b) {
		return string(b)
	}
	return map[string]any{"base64": base64.StdEncoding.EncodeToString(b)}
}

// decodeValue decodes a value's bytes as mode says.
func decodeValue(b []byte, mode ValueMode) (any, error) {
	switch mode {
	case ValueBase64:
		return base64.StdEncoding.EncodeToString(b), nil
	case ValueText:
		if !utf8.Valid(b) {
			return nil, errors.New("value is not valid UTF-8 (try --value auto or base64)")
		}
		return string(b), nil
	case ValueJSON:
		if !utf8.Valid(b) {
			return nil, errors.New("value is not JSON: not valid UTF-8")
		}
		v, err := parseJSON(b)
		if err != nil {
			return nil, fmt.Errorf("value is not JSON: %w", err)
		}
		return v, nil
	}
	if !utf8.Valid(b) {
		// encoding/json would replace the bad bytes: not lossless.
		return Bytes(b), nil
	}
	if v, err := parseJSON(b); err == nil {
		return v, nil
	}
	return string(b), nil
}

// parseJSON parses exactly one JSON value, keeping numbers exact.
func parseJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}
