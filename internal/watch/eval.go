package watch

import (
	"reflect"

	"github.com/nodewatch/nodewatch/internal/jsondoc"
)

// filterFunc, equalsFunc and untilMet apply the user's jq programs with
// the Strict policy, under the run's context.

func (r *run) filterFunc() func(id string, obj any) (bool, error) {
	if r.o.Filter == nil {
		return nil
	}
	return func(id string, obj any) (bool, error) {
		ok, err := r.o.Filter.TruthyDoc(r.ctx, obj)
		if !ok {
			r.hints.decline(obj) // before the follower may free it
		}
		return ok, r.evalError(id, err)
	}
}

func (r *run) equalsFunc() func(id string, a, b any) (bool, error) {
	if r.o.Equals == nil && r.o.EqualsField != "" {
		field := r.o.EqualsField
		return func(id string, a, b any) (bool, error) {
			da, aok := a.(*jsondoc.Doc)
			db, bok := b.(*jsondoc.Doc)
			if !aok || !bok {
				return reflect.DeepEqual(a, b), nil
			}
			return jsondoc.SameField(da, db, field), nil
		}
	}
	if r.o.Equals == nil {
		return nil
	}
	return func(id string, a, b any) (bool, error) {
		eq, err := r.o.Equals.EqualDoc(r.ctx, a, b)
		return eq, r.evalError(id, err) // on error eq is false: print the change
	}
}

// evalError applies Strict to an evaluation error on the object with the
// given id ("" for the whole view). An evaluation cut short because the
// run ends is no warning: it ends the evaluation.
func (r *run) evalError(id string, err error) error {
	if err == nil {
		return nil
	}
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	if r.o.Strict {
		return err // the follower adds the id
	}
	r.warn.warn(id, err.Error())
	return nil
}
