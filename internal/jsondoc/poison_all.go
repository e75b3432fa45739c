//go:build race || nodewatch_poison

package jsondoc

// poisonAll: Free overwrites all of a freed encoding. Test builds (the
// race detector's, and the end-to-end tests' binary, built with the tag
// nodewatch_poison) use it, so that any read of freed memory shows as
// what no JSON is.
const poisonAll = true
