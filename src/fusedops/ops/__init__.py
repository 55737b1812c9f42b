"""One module per op: its Python side (shape function, autograd, the public
function). The kernels and schemas are in cpp/<op>/ and cuda/<op>/."""
