// Package packertest judges the packing engine from the outside: table tests per
// scheduling constraint, a seeded property test that checks random plans with the
// independent checker (shared/packer/check), determinism, and the benchmarks of
// the foundation issue. It holds only tests; nothing imports it.
package packertest
