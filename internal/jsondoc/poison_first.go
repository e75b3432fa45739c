//go:build !race && !nodewatch_poison

package jsondoc

// poisonAll: Free overwrites the first byte of a freed encoding only. A
// full overwrite cost 2–4% of a live stream's CPU (a memset of every
// object an update lets go of); the tests, which run with the race
// detector or the tag nodewatch_poison, overwrite all of it.
const poisonAll = false
