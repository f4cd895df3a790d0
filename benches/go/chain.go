// The daisy chain: n goroutines, each receives one value from its left
// neighbour and passes it on plus one, spawned from main; main feeds the
// first and reads the last. The peer of swco's benches/examples/skynet.rs
// --chain.
//
//	go run chain.go N REPS
//
// Prints one line per run: "chain <result> <milliseconds>".
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	n, _ := strconv.Atoi(os.Args[1])
	reps, _ := strconv.Atoi(os.Args[2])
	for r := 0; r < reps; r++ {
		start := time.Now()
		first := make(chan int64, 1)
		left := first
		done := make(chan struct{}, n)
		for i := 0; i < n; i++ {
			right := make(chan int64, 1)
			go func(l <-chan int64, r chan<- int64) {
				r <- 1 + <-l
				done <- struct{}{}
			}(left, right)
			left = right
		}
		first <- 1
		v := <-left
		for i := 0; i < n; i++ {
			<-done
		}
		fmt.Printf("chain %d %.3f\n", v, float64(time.Since(start).Microseconds())/1000)
	}
}
