"""An embedding-bag sum of whole 1 KiB table rows picked by random indices, one program per bag: one row at a time on
one warp (each row's address waits on its index), and its twin gathering a tile of rows per step on 4 warps."""
