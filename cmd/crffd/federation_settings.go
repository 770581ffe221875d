package main

// federationSettings are the keys of the coordinator and of a site's
// federation section.
var federationSettings = []setting{}
