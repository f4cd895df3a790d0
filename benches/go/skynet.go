// Skynet (github.com/atemerev/skynet): a tree of goroutines, 10 children per
// node, down to `leaves` leaves; each leaf returns its number and every node
// sums its children. The peer of swco's benches/examples/skynet.rs, run by it.
//
//	go run skynet.go LEAVES REPS
//
// Prints one line per run: "skynet <sum> <milliseconds>".
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func skynet(c chan<- int64, num, size, div int64) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int64, div)
	child := size / div
	for i := int64(0); i < div; i++ {
		go skynet(rc, num+i*child, child, div)
	}
	var sum int64
	for i := int64(0); i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func main() {
	leaves, _ := strconv.ParseInt(os.Args[1], 10, 64)
	reps, _ := strconv.Atoi(os.Args[2])
	for r := 0; r < reps; r++ {
		start := time.Now()
		c := make(chan int64)
		go skynet(c, 0, leaves, 10)
		sum := <-c
		fmt.Printf("skynet %d %.3f\n", sum, float64(time.Since(start).Microseconds())/1000)
	}
}
