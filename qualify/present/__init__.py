"""What the decision document is presented from, below the stages, which present themselves
with it: the decision's records (`record`), the run as read (`reading`), the plots, the cells
the stage sections share (`sections`) and the document's wording."""
