package jsondoc

func (d *Differ) found() {
	start := len(d.arena)
	for _, s := range d.path {
		if s.key != nil {
			d.arena = append(d.arena, d.key(s.key))
		} else {
			d.arena = append(d.arena, s.index)
		}
	}
	// Capped, so that appending to one path cannot overwrite the next;
	// a grown arena leaves earlier paths on the old array, still valid.
	d.out = append(d.out, Path(d.arena[start:len(d.arena):len(d.arena)]))
}

// key returns k as a path step, the same string for the same key from
// one call to the next: an encoder diffs the same kinds of objects over
// and over. At most 4,096 keys are kept.
func (d *Differ) key(k []byte) any {
	// The keys of one kind of record are few: most are found in a small
	// table by their length and ends, without hashing them.
	var slot int
	if len(k) > 0 {
		slot = (len(k)*7 + int(k[0]) + int(k[len(k)-1])*3) % len(d.recent)
		if r := &d.recent[slot]; r.key == string(k) && r.step != nil {
			return r.step
		}
	}
	v := d.keyStep(k)
	if len(k) > 0 {
		d.recent[slot] = recentKey{v.(string), v}
	}
	return v
}

// A recentKey is a key and its step, as Differ.key last found it.
type recentKey struct {
	key  string
	step any
}

// keyStep is key by way of the map.
func (d *Differ) keyStep(k []byte) any {
	if v, ok := d.keys[string(k)]; ok {
		return v
	}
	if d.keys == nil || len(d.keys) >= 1<<12 {
		d.keys = map[string]any{}
	}
	var v any = string(k)
	d.keys[string(k)] = v
	return v
}

// At returns the encoding of the value at p in d, and whether there is
// one: a key that is absent, an index out of range or a step into a
// scalar has none.
func At(d *Doc, p Path) ([]byte, bool) {
	v := d.json
	for _, step := range p {
		found := false
		switch s := step.(type) {
		case string:
			v, found = Field(v, s)
		case int:
			v, found = Element(v, s)
		}
		if !found {
			return nil, false
		}
	}
	return v, true
}
