"""The web page `ct serve` shows (plain HTML, CSS and JavaScript files shipped here) and the data it reads.

`views` shapes what the page asks for from the public `Store` verbs; `mask` hides secrets before
anything is sent to a browser.
"""
