"""An fp32 sum into one address: 524,288 programs of 32 elements each adding their scalar partial sum with one atomic
(all on the same word), and its twin reducing 4096 elements on chip per atomic."""
