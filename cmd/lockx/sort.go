package main

import (
	"sort"

	"github.com/lockx-go/lockx/lockx"
)

func sortInfos(infos []lockx.LockInfo) {
	sort.Slice(infos, func(i, j int) bool { return infos[i].Key < infos[j].Key })
}
