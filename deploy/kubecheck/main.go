// Command kubecheck decodes Kubernetes manifests strictly into the API's
// own Go types, as deploy/'s tests need: a field the type does not have,
// a value of the wrong type, a key given twice or a kind it does not know
// is an error. What the API server would check beyond the types (that a
// selector matches the labels, that ports agree) is for the caller, which
// gets every object on stdout as one JSON array of
// {"file", "kind", "name", "object"}, the object as its type marshals it
// (absent fields dropped, ports and quantities in one spelling).
//
// Usage: kubecheck FILE...
//
// Exit status 1 when a manifest does not decode (why on stderr, one line
// per document), 2 on a usage error.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// object is what every kind kubecheck knows is: a kind with metadata.
type object interface {
	GetName() string
}

// newObject returns a new, empty value of the type of apiVersion and
// kind, or false for a kind kubecheck does not know.
func newObject(tm metav1.TypeMeta) (object, bool) {
	switch tm {
	case metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}:
		return new(appsv1.Deployment), true
	case metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}:
		return new(corev1.Service), true
	case metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}:
		return new(corev1.ConfigMap), true
	case metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"}:
		return new(policyv1.PodDisruptionBudget), true
	}
	return nil, false
}

// decoded is one document as kubecheck prints it.
type decoded struct {
	File   string          `json:"file"`
	Kind   string          `json:"kind"`
	Name   string          `json:"name"`
	Object json.RawMessage `json:"object"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubecheck FILE...")
		os.Exit(2)
	}
	var all []decoded
	failed := false
	for _, file := range os.Args[1:] {
		docs, err := decodeFile(file)
		for _, err := range err {
			fmt.Fprintf(os.Stderr, "kubecheck: %v\n", err)
			failed = true
		}
		all = append(all, docs...)
	}
	if failed {
		os.Exit(1)
	}
	out, err := json.MarshalIndent(all, "", "  ")
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubecheck: %v\n", err)
		os.Exit(1)
	}
	os.Stdout.Write(append(out, '\n'))
}

// decodeFile decodes every document of file, and returns those that
// decoded and an error for each that did not.
func decodeFile(file string) ([]decoded, []error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, []error{err}
	}
	defer f.Close()
	r := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var docs []decoded
	var errs []error
	for i := 1; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return docs, append(errs, fmt.Errorf("%s: document %d: %w", file, i, err))
		}
		d, err := decode(doc)
		switch {
		case errors.Is(err, errEmpty):
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: document %d: %w", file, i, err))
			continue
		}
		d.File = file
		docs = append(docs, d)
	}
	if len(docs) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%s: no object", file))
	}
	return docs, errs
}

// errEmpty is a document of nothing but comments.
var errEmpty = errors.New("empty document")

// decode decodes one document strictly into the type its apiVersion and
// kind name.
func decode(doc []byte) (decoded, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return decoded{}, err
	}
	if tm == (metav1.TypeMeta{}) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			return decoded{}, errEmpty
		}
		return decoded{}, errors.New("no apiVersion and kind")
	}
	obj, ok := newObject(tm)
	if !ok {
		return decoded{}, fmt.Errorf("apiVersion %q kind %q: not a kind kubecheck knows", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return decoded{}, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	if obj.GetName() == "" {
		return decoded{}, fmt.Errorf("%s: no metadata.name", tm.Kind)
	}
	js, err := json.Marshal(obj)
	if err != nil {
		return decoded{}, fmt.Errorf("%s %s: %w", tm.Kind, obj.GetName(), err)
	}
	return decoded{Kind: tm.Kind, Name: obj.GetName(), Object: js}, nil
}

// stripComments drops the comment lines of a YAML document.
func stripComments(doc []byte) []byte {
	var out []byte
	for line := range bytes.Lines(doc) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}
