// Package fault holds the fault tests: each sells on three `shop serve`
// processes (shoptest.StartSale) and breaks a shop or a server under it
// mid-burst (kills, pauses, partitions, failovers, elections, restarts),
// then checks what the buyers were told against the database and the
// sale's history against the shop's model. It has no code but its tests;
// docs/tests.md lists them.
package fault
