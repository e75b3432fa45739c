package etcdkv

import (
	"errors"
	"strings"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// Rule names the segments of the keys its Pattern matches and says how
// their values are decoded.
type Rule struct {
	Pattern *KeyPattern
	Value   ValueMode
}

// Rules turn key-values into the objects a watch prints: the first rule
// whose pattern matches a key names its segments (the object's "fields")
// and decodes its value; a key that no rule matches gets no fields and is
// decoded as Default says.
type Rules struct {
	Rules   []Rule
	Default ValueMode
	// Name is how messages name the rules, e.g. "--key-pattern /a/{b}";
	// "" names their patterns. ModeFlag is how they name the value mode,
	// e.g. "--value", when they suggest another (ValueError).
	Name, ModeFlag string
}

// Decoder returns the decoding for Watcher.Decode. The first key that no
// rule matches is reported through logf (nil: not at all); later ones are
// not. It is safe for concurrent use.
func (r *Rules) Decoder(logf func(format string, args ...any)) func(kv *mvccpb.KeyValue) (any, error) {
	decode, _ := r.Decoders(logf)
	return decode
}

// Decoders returns the decodings for Watcher.Decode and
// Watcher.DecodeFrom, which report an unmatched key once between them.
// With from, ref (an object made for the same key before, or nil) lets a
// JSON value be compacted by what changed (ObjectFrom); both decode
// exactly as Decoder does.
func (r *Rules) Decoders(logf func(format string, args ...any)) (decode func(kv *mvccpb.KeyValue) (any, error), from func(kv *mvccpb.KeyValue, ref any) (any, error)) {
	var reported atomic.Bool
	from = func(kv *mvccpb.KeyValue, ref any) (any, error) {
		mode, fields, matched := r.Default, []Field(nil), false
		for _, rule := range r.Rules {
			if fields, matched = rule.Pattern.Match(string(kv.Key)); matched {
				mode = rule.Value
				break
			}
		}
		if !matched && len(r.Rules) > 0 && logf != nil && !reported.Swap(true) {
			logf("%q does not match %s: printed without fields (reported for the first such key only)", kv.Key, r.name())
		}
		obj, err := ObjectFrom(kv, mode, fields, ref)
		if err != nil {
			// Only here: errors.As's target escapes, an allocation
			// for every record.
			var ve *ValueError
			if errors.As(err, &ve) {
				ve.Flag = r.ModeFlag
			}
		}
		return obj, err
	}
	return func(kv *mvccpb.KeyValue) (any, error) { return from(kv, nil) }, from
}

// mode returns how the value of key is decoded: by the first rule whose
// pattern matches it, else by Default.
func (r *Rules) mode(key string) ValueMode {
	for _, rule := range r.Rules {
		if _, ok := rule.Pattern.Match(key); ok {
			return rule.Value
		}
	}
	return r.Default
}

// name names the rules for a message.
func (r *Rules) name() string {
	if r.Name != "" {
		return r.Name
	}
	var ps []string
	for _, rule := range r.Rules {
		ps = append(ps, rule.Pattern.String())
	}
	if len(ps) == 1 {
		return ps[0]
	}
	return "any of " + strings.Join(ps, ", ")
}

// Summary is what a person reads of a key's object (-o text): its fields,
// in the order the patterns name them, and its value as stored, without
// the revisions. obj is an object as Object makes it; anything else
// summarizes to "".
func (r *Rules) Summary(obj any) string {
	d, ok := obj.(*jsondoc.Doc)
	if !ok {
		return ""
	}
	value, _ := d.Member("value")
	var fields map[string]any
	if raw, ok := jsondoc.At(d, jsondoc.Path{"fields"}); ok {
		t, _ := jsondoc.Decode(raw)
		fields, _ = t.(map[string]any)
	}
	if len(fields) == 0 {
		return string(value)
	}
	var parts []string
	seen := map[string]bool{}
	for _, rule := range r.Rules {
		for _, name := range rule.Pattern.Names() {
			if v, ok := fields[name].(string); ok && !seen[name] {
				seen[name] = true
				parts = append(parts, name+"="+v)
			}
		}
	}
	return strings.Join(parts, " ") + "  " + string(value)
}
